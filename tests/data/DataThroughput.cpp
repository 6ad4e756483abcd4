//===- DataThroughput.cpp - Samples per second of the input pipeline ------===//
//
// Not a test: the numbers behind docs/input-pipeline.md. For each data set
// and thread count it runs whole epochs with a consumer that does nothing
// else, and prints samples per second (wall clock), CPU milliseconds per
// sample (all threads; the robust number on a shared machine) and the time
// the consumer waited.
//
//   data_throughput [--quick] [synthetic|fashion-mnist|images]
//
// The image-folder case writes JPEGs of 500×375 (a typical photo) with
// libturbojpeg into a temporary folder first.
//
//===----------------------------------------------------------------------===//
#include "executor/data/DataLoader.h"
#include "executor/data/OpenDataset.h"

#include "ir/Random.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <turbojpeg.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>

using namespace graphc;

namespace {

void writeJpegFolder(const std::string &dir, int classes, int perClass) {
  tjhandle tj = tjInitCompress();
  const int w = 500, h = 375;
  std::vector<unsigned char> rgb(w * h * 3);
  for (int c = 0; c < classes; ++c) {
    std::string classDir = dir + "/class" + std::to_string(c);
    llvm::sys::fs::create_directories(classDir);
    for (int i = 0; i < perClass; ++i) {
      RandomStream rng(c, i);
      double fx = 0.01 + 0.05 * rng.uniform(), fy = 0.01 + 0.05 * rng.uniform();
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int k = 0; k < 3; ++k)
            rgb[(y * w + x) * 3 + k] =
                (unsigned char)(127 + 100 * std::sin(fx * x * (k + 1) + fy * y) +
                                20 * (rng.uniform() - 0.5));
      unsigned char *jpeg = nullptr;
      unsigned long size = 0;
      tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &jpeg, &size, TJSAMP_420, 90, 0);
      std::ofstream(classDir + "/img" + std::to_string(i) + ".jpg", std::ios::binary)
          .write(reinterpret_cast<char *>(jpeg), (std::streamsize)size);
      tjFree(jpeg);
    }
  }
  tjDestroy(tj);
}

void measure(const std::string &spec, const DatasetOptions &dopts, SampleShape target,
             int64_t batch, int threads, int epochs) {
  auto ds = openDataset(spec, dopts);
  if (!ds) {
    llvm::errs() << llvm::toString(ds.takeError()) << "\n";
    return;
  }
  std::shared_ptr<const Dataset> data = std::move(*ds);
  LoaderOptions lo;
  lo.batch = batch;
  lo.target = target;
  lo.threads = threads;
  auto loader = DataLoader::create(data, lo);
  if (!loader) {
    llvm::errs() << llvm::toString(loader.takeError()) << "\n";
    return;
  }
  auto start = std::chrono::steady_clock::now();
  std::clock_t cpuStart = std::clock();
  for (int e = 0; e < epochs; ++e) {
    (*loader)->startEpoch(e);
    while (true) {
      auto b = (*loader)->next();
      if (!b) {
        llvm::errs() << llvm::toString(b.takeError()) << "\n";
        return;
      }
      if (!b->has_value())
        break;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double cpu = (double)(std::clock() - cpuStart) / CLOCKS_PER_SEC;
  LoaderStats s = (*loader)->stats();
  llvm::outs() << llvm::format("%-13s %-9s -> %-9s B=%-3lld threads %d: %8.0f samples/s, "
                               "%7.3f CPU ms/sample (%lld samples, %.2f s, waited %.2f s)\n",
                               spec.substr(0, spec.find(':')).c_str(),
                               toString(data->shape()).c_str(), toString(target).c_str(),
                               (long long)batch, threads, s.samples / seconds,
                               cpu / s.samples * 1e3, (long long)s.samples, seconds, s.waitSeconds);
}

} // namespace

int main(int argc, char **argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick")
      quick = true;
    else
      only = argv[i];
  }
  auto wanted = [&](const std::string &kind) { return only.empty() || only == kind; };
  const SampleShape inception{3, 299, 299};

  if (wanted("synthetic")) {
    DatasetOptions synthetic;
    synthetic.shape = inception;
    synthetic.samples = quick ? 256 : 1024;
    for (int threads : {0, 1, 2})
      measure("synthetic", synthetic, inception, 16, threads, 1);
  }
  if (wanted("fashion-mnist")) {
    DatasetOptions fmnist;
    for (int threads : {0, 1, 2})
      measure("fashion-mnist", fmnist, {1, 28, 28}, 64, threads, 1);
    fmnist.split = Split::Test;
    for (int threads : {0, 1, 2})
      measure("fashion-mnist", fmnist, inception, 16, threads, 1);
  }
  if (!wanted("images"))
    return 0;
  std::string dir =
      "/tmp/graphc-data-throughput-" + std::to_string(llvm::sys::Process::getProcessId());
  writeJpegFolder(dir, 4, quick ? 16 : 64);
  DatasetOptions images;
  images.shape = inception;
  for (int threads : {0, 1, 2})
    measure("images:" + dir, images, inception, 16, threads, 1);
  llvm::sys::fs::remove_directories(dir);
  return 0;
}
