//===- ClusterFile.h - A cluster file of a test's own ------------*- C++ -*-===//
//
// The host (64 GiB) and `gpus` GPUs of one memory, each GPU linked to the
// host, as a cluster file (ir/Cluster.h's JSON) in a directory of the test's
// own, removed with it: for tests that place plans under a memory limit.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "TempDir.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace graphc::testcluster {

struct ClusterFile {
  tempdir::TempDir dir;
  std::string path;
  ClusterFile(int gpus, int64_t gpuBytes, double hostBandwidth = 6.4e10)
      : path(dir.file("cluster.json")) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    EXPECT_FALSE(ec) << path << ": " << ec.message();
    os << R"({"devices": [{"name": "cpu:0", "kind": "cpu", "memory_bytes": 68719476736, )"
       << R"("relative_speed": 1})";
    for (int g = 0; g < gpus; ++g)
      os << R"(, {"name": "gpu:)" << g << R"(", "kind": "gpu", "memory_bytes": )" << gpuBytes
         << R"(, "relative_speed": 1})";
    os << R"(], "links": [)";
    for (int g = 0; g < gpus; ++g)
      os << (g ? ", " : "") << R"({"endpoints": ["cpu:0", "gpu:)" << g << R"("], "bandwidth": )"
         << hostBandwidth << "}";
    os << "]}";
  }
};

} // namespace graphc::testcluster
