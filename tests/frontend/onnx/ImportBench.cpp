//===- ImportBench.cpp - Time to import an ONNX model ----------------------===//
//
// Not a test: `onnx_import_bench model.onnx [repeats]` reads the file into
// memory, then imports the bytes `repeats` times and prints the read time and
// the best and median import times (parsing, converting weights, building and
// verifying the graph), and how much of that protobuf's parse alone takes.
// docs/onnx-frontend.md records the figures.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxImporter.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <vector>

using namespace graphc;

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: onnx_import_bench model.onnx [repeats]\n";
    return 2;
  }
  int repeats = argc > 2 ? std::max(1, atoi(argv[2])) : 5;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };

  auto t0 = Clock::now();
  auto buf = llvm::MemoryBuffer::getFile(argv[1], /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false, /*IsVolatile=*/true);
  if (!buf) {
    llvm::errs() << "cannot read " << argv[1] << ": " << buf.getError().message() << "\n";
    return 1;
  }
  std::string bytes = (*buf)->getBuffer().str();
  double read = seconds(Clock::now() - t0);

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> times, parses;
  size_t variables = 0;
  for (int i = 0; i < repeats; ++i) {
    auto t = Clock::now();
    auto m = importOnnxBytes(bytes, {}, argv[1]);
    times.push_back(seconds(Clock::now() - t));
    if (!m) {
      llvm::errs() << llvm::toString(m.takeError()) << "\n";
      return 1;
    }
    variables = (*m)->variables().size();
    t = Clock::now();
    onnx::ModelProto proto;
    proto.ParseFromArray(bytes.data(), (int)bytes.size());
    parses.push_back(seconds(Clock::now() - t));
  }
  llvm::outs() << llvm::format("%s: %.1f MB, %zu variables\n", argv[1], bytes.size() / 1e6,
                               variables)
               << llvm::format("read %.3f s; import best %.3f s, median %.3f s (%d runs); of "
                               "which protobuf parsing alone: median %.3f s\n",
                               read, *std::min_element(times.begin(), times.end()), median(times),
                               repeats, median(parses));
  return 0;
}
