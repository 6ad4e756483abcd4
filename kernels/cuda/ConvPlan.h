//===- ConvPlan.h - How a convolution node becomes cuDNN calls ---*- C++ -*-===//
//
// The host-side decisions of the cuDNN convolution kernels, as pure
// functions the host tests check:
//  - the node's shapes and window come from kernels/ConvGeometry.h, as the
//    CPU twin's do;
//  - lowerConv: cuDNN's legacy descriptors take one pad per axis, so
//    asymmetric padding becomes an explicit zero-pad of x into scratch (or a
//    crop of the padded gradient) plus the smaller, symmetric pad;
//  - chooseConvAlgorithm: the first candidate, in cuDNN's heuristic order
//    (cudnnGet*_v7), that succeeded, fits the workspace limit, is
//    deterministic (when any candidate is, unless the backend allows
//    otherwise) and, in strict FP32, uses no tensor-core math;
//  - convCacheKey: the key of the process-wide choice cache (shapes,
//    window, direction, choice policy, device), so each shape is decided once.
//
// Why heuristics rather than cudnnFind* by default: Find runs every algorithm
// at bind time, on buffers of its own (the arena does not exist yet), for
// every distinct shape and direction, and ranks by measured time, so two runs
// of the same model may choose differently and lose bitwise reproducibility.
// Get*_v7 needs no memory, runs nothing and answers the same for the same
// shapes on the same GPU and library. GRAPHC_CUDNN_BENCHMARK=1 asks Find
// instead (PyTorch's torch.backends.cudnn.benchmark), for speed; its ranked
// answers go through the same chooseConvAlgorithm.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "kernels/ConvGeometry.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace graphc {
namespace cuda {

enum class ConvDirection : uint8_t { Forward, BackwardData, BackwardFilter };

/// Workspace a convolution algorithm may use (from the device's scratch).
inline constexpr size_t kConvWorkspaceLimit = size_t(256) << 20;

struct ConvLowering {
  bool explicitPad = false; ///< x is padded (or dx cropped) through scratch
  Dims paddedX;             ///< x as cuDNN sees it
  int64_t pad[2] = {0, 0};  ///< cuDNN's symmetric pads
  int64_t extraBegin[2] = {0, 0}, extraEnd[2] = {0, 0}; ///< the explicit part
};

ConvLowering lowerConv(const ConvGeometry &g);

/// One answer of cudnnGet*Algorithm_v7, in cuDNN's order.
struct AlgoCandidate {
  int algo = 0;
  bool ok = false; ///< status CUDNN_STATUS_SUCCESS
  size_t memory = 0;
  bool deterministic = false;
  bool tensorOps = false; ///< math type TENSOR_OP or TENSOR_OP_ALLOW_CONVERSION
};

/// The index of the chosen candidate, or none when nothing fits.
std::optional<size_t> chooseConvAlgorithm(llvm::ArrayRef<AlgoCandidate> candidates,
                                          size_t workspaceLimit, bool allowTF32,
                                          bool deterministic = true);

/// How a shape's algorithm is chosen: what goes into the cache key besides
/// the shape and the device.
struct ConvChoicePolicy {
  bool allowTF32 = true;     ///< tensor-core math for f32 (always for f16)
  bool half = false;         ///< f16 data
  bool deterministic = true; ///< deterministic algorithms where there is one
  bool measured = false;     ///< ranked by cudnnFind* (timed) instead of heuristics
};

std::string convCacheKey(const ConvGeometry &g, ConvDirection d, const ConvChoicePolicy &policy,
                         int ordinal);

} // namespace cuda
} // namespace graphc
