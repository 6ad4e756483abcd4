//===- ClusterFile.h - A cluster file of a test's own ------------*- C++ -*-===//
//
// The host (64 GiB) and GPUs of the memories given, each GPU linked to the
// host, as a cluster file (ir/Cluster.h's JSON) in a directory of the test's
// own, removed with it: for tests that place plans under a memory limit.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "TempDir.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace graphc::testcluster {

struct ClusterFile {
  tempdir::TempDir dir;
  std::string path;
  /// gpu:i with gpuBytes[i].
  explicit ClusterFile(const std::vector<int64_t> &gpuBytes, double hostBandwidth = 6.4e10)
      : path(dir.file("cluster.json")) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    EXPECT_FALSE(ec) << path << ": " << ec.message();
    os << R"({"devices": [{"name": "cpu:0", "kind": "cpu", "memory_bytes": 68719476736, )"
       << R"("relative_speed": 1})";
    for (size_t g = 0; g < gpuBytes.size(); ++g)
      os << R"(, {"name": "gpu:)" << g << R"(", "kind": "gpu", "memory_bytes": )" << gpuBytes[g]
         << R"(, "relative_speed": 1})";
    os << R"(], "links": [)";
    for (size_t g = 0; g < gpuBytes.size(); ++g)
      os << (g ? ", " : "") << R"({"endpoints": ["cpu:0", "gpu:)" << g
         << R"("], "bandwidth": )" << hostBandwidth << "}";
    os << "]}";
  }
  /// `gpus` GPUs of `gpuBytes` each.
  ClusterFile(int gpus, int64_t gpuBytes, double hostBandwidth = 6.4e10)
      : ClusterFile(std::vector<int64_t>((size_t)gpus, gpuBytes), hostBandwidth) {}
};

} // namespace graphc::testcluster
