//===- CudaTestSupport.h - Skipping where no GPU is usable -------*- C++ -*-===//
#pragma once

#include "executor/cuda/CudaDevice.h"

#include <gtest/gtest.h>

/// Skips the test with "no CUDA device" (and why) where no GPU is usable.
#define GRAPHC_REQUIRE_GPUS(n)                                                                     \
  do {                                                                                             \
    if (::graphc::cudaVisibleDeviceCount() == 0)                                                   \
      GTEST_SKIP() << "no CUDA device (" << ::graphc::cudaUnavailableReason() << ")";              \
    if (::graphc::cudaVisibleDeviceCount() < (n))                                                  \
      GTEST_SKIP() << "needs " << (n) << " GPUs, " << ::graphc::cudaVisibleDeviceCount()           \
                   << " visible";                                                                  \
  } while (0)

namespace graphc {
/// Logical GPU device gpu:`index` on physical GPU `ordinal`; fails the test
/// on error.
inline std::unique_ptr<CudaDevice>
makeGpu(unsigned index, int ordinal = 0,
        std::chrono::milliseconds timeout = std::chrono::minutes(1)) {
  DeviceRequest req;
  req.id = DeviceId::gpu(index);
  req.physicalOrdinal = ordinal;
  req.waitTimeout = timeout;
  auto d = CudaDevice::create(req);
  EXPECT_TRUE(bool(d)) << (d ? "" : llvm::toString(d.takeError()));
  return d ? std::move(*d) : nullptr;
}
} // namespace graphc
