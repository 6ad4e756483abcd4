//===- BroadcastProbe.cpp - The world's broadcast under mpirun ------------===//
//
// What NCCL's unique id travels by (executor/cuda/NcclAcrossWorkers.h):
// rank 0 draws 128 random bytes, every other rank starts from bytes of its
// own, and after the world's broadcast (executor/dist/WorkerCollectives.h)
// each rank prints what it holds and the hashes every rank holds (gather). mpi_test.py checks that
// every rank holds rank 0's bytes. With --stall-root, rank 0 never takes part: the others must fail
// within --timeout-ms, naming themselves and the broadcast, and end the job as graphrun does.
//
//===----------------------------------------------------------------------===//

#include "executor/dist/StartWorkers.h"

#include "llvm/Support/xxhash.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

using namespace graphc;

int main(int argc, char **argv) {
  bool stallRoot = false;
  long timeoutMs = 10000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--stall-root"))
      stallRoot = true;
    else if (!std::strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
      timeoutMs = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: mpi_broadcast_probe [--stall-root] [--timeout-ms N]\n");
      return 2;
    }
  }
  auto launched = launchedWorld(std::getenv);
  if (!launched) {
    std::fprintf(stderr, "error: %s\n", llvm::toString(launched.takeError()).c_str());
    return 1;
  }
  auto started = startWorkers(*launched);
  if (!started) {
    std::fprintf(stderr, "error: %s\n", llvm::toString(started.takeError()).c_str());
    return 1;
  }
  Workers &w = **started;
  w.setTimeout(std::chrono::milliseconds(timeoutMs));
  std::vector<uint8_t> bytes(128);
  if (w.rank() == 0) {
    std::random_device rd;
    for (uint8_t &b : bytes)
      b = (uint8_t)rd();
  } else {
    std::fill(bytes.begin(), bytes.end(), (uint8_t)(0xa0 + w.rank()));
  }
  if (stallRoot && w.rank() == 0) {
    // Silent past the others' deadline; they end the job.
    std::this_thread::sleep_for(std::chrono::milliseconds(timeoutMs * 20));
    w.finish();
    return 0;
  }
  auto fail = [&](llvm::Error e) {
    std::fprintf(stderr, "error: %s: %s\n", w.whoAmI().c_str(),
                 llvm::toString(std::move(e)).c_str());
    std::fflush(stderr);
    w.abortAll(1);
  };
  if (auto e = w.collectives().broadcast(bytes, "the probe's 128 bytes"))
    fail(std::move(e));
  uint64_t mine = llvm::xxHash64(llvm::StringRef((const char *)bytes.data(), bytes.size()));
  auto all = w.collectives().gather(mine, "the probe's hashes");
  if (!all)
    fail(all.takeError());
  std::string hex;
  for (uint8_t b : bytes) {
    char h[3];
    std::snprintf(h, sizeof(h), "%02x", b);
    hex += h;
  }
  std::string hashes;
  for (uint64_t h : *all) {
    if (!hashes.empty())
      hashes += ',';
    hashes += std::to_string(h);
  }
  std::printf("rank %u of %u: bytes %s hashes %s\n", w.rank(), w.size(), hex.c_str(),
              hashes.c_str());
  std::fflush(stdout);
  w.finish();
  return 0;
}
