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
//  - convTypes: the one data type cuDNN computes the node in, and which of
//    its f32 weights, bias or filter gradient pass through scratch beside
//    16-bit data (--precision bf16 keeps them f32);
//  - convQueryMath: the math type set on the descriptor before cuDNN is
//    asked, so its answers include the algorithms that type allows;
//  - convWorkspaceBudget: the workspace an algorithm may take, from the
//    device's free memory;
//  - convCacheKey: the key of the choice cache (device context, shapes,
//    window, direction, choice policy), so each shape is decided once per
//    process, and a measured one once per machine (ConvAlgorithmFile.h).
//
// Measured (cudnnFind*) by default: Find runs every algorithm at bind time,
// on buffers of its own (the arena does not exist yet), for every distinct
// shape and direction, and ranks by measured time, so two first runs may
// choose differently; the choice file makes every later run on the machine
// repeat the first one's choices (bitwise-repeatable steps given the file).
// GRAPHC_CUDNN_BENCHMARK=0 asks the heuristics (Get*_v7) instead: no memory,
// nothing run, the same answer for the same shapes on the same GPU and
// library, without a file. Either way the ranked answers go through the same
// chooseConvAlgorithm.
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

/// The workspace a convolution algorithm may take (from the device's
/// scratch, which is as large as the largest any kernel on the device takes):
/// a sixteenth of the device memory free when the kernels are bound, at least
/// kMinConvWorkspace and at most kMaxConvWorkspace (one workspace per
/// device, so the upper bound is what the whole device pays at most; PyTorch
/// lets Find try workspaces up to what it can allocate).
inline constexpr size_t kMinConvWorkspace = size_t(64) << 20;
inline constexpr size_t kMaxConvWorkspace = size_t(4) << 30;
size_t convWorkspaceBudget(size_t freeBytes);

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

/// The types of a convolution as cuDNN computes it. cuDNN's x, w and y
/// descriptors take one data type with f32 compute (its FLOAT, PSEUDO_HALF
/// and PSEUDO_BFLOAT16 configurations), so beside 16-bit data an f32 operand
/// is narrowed into scratch first (the weights of Conv and ConvGradData, a
/// Conv's bias), and an f32 filter gradient (ConvGradFilter {to = f32}) is
/// computed in `data` into scratch and widened: --precision bf16 keeps every
/// convolution's weights f32 on every device (passes/MixedPrecision.h).
struct ConvTypes {
  DType data = DType::F32;  ///< f32, f16 or bf16
  bool wideWeights = false; ///< w (Conv, ConvGradData) or dw (ConvGradFilter) is f32
  bool wideBias = false;    ///< a Conv's bias is f32
};

/// The types of a convolution node of `op` over operands of `operands`
/// giving `result`, or why cuDNN cannot compute it.
llvm::Expected<ConvTypes> convTypes(Op op, llvm::ArrayRef<DType> operands, DType result);

/// How a shape's algorithm is chosen: what goes into the cache key besides
/// the shape and the device.
struct ConvChoicePolicy {
  bool allowTF32 = true;     ///< tensor-core math for f32 (always for 16-bit data)
  DType data = DType::F32;   ///< what cuDNN computes in (ConvTypes::data)
  bool deterministic = true; ///< deterministic algorithms where there is one
  bool measured = false;     ///< ranked by cudnnFind* (timed) instead of heuristics
  bool channelsLast = false; ///< NHWC tensors and a KRSC filter (GpuLayoutRules.h)
};

/// cuDNN's math types, without its header.
enum class ConvMath : uint8_t { Default, TensorOp, Fma };
/// The math type to ask under. 16-bit data (f16, bf16): TENSOR_OP, because
/// under the default math type cuDNN's Get and Find need not offer its
/// tensor-core algorithms for them (PyTorch sets TENSOR_OP for half too);
/// f32 with TF32 allowed: DEFAULT (which permits TF32 tensor cores); strict
/// f32: FMA.
ConvMath convQueryMath(const ConvChoicePolicy &policy);

/// `device`: deviceContextKey's text for the GPU (ConvAlgorithmFile.h).
std::string convCacheKey(llvm::StringRef device, const ConvGeometry &g, ConvDirection d,
                         const ConvChoicePolicy &policy);

} // namespace cuda
} // namespace graphc
