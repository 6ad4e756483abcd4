//===- CudaTestUtil.h - Running one node on the GPU and on the CPU -*- C++ -*-===//
//
// The CUDA kernel tests build one node (ir/Builder.h), run its CPU kernel
// (kernels/KernelRunner.h) and its CUDA kernel on the same random inputs and
// compare. Without a usable GPU (cudaGetDeviceCount fails or finds none) the
// GPU tests skip with "no CUDA device"; the backend they use has TF32 off
// (strict FP32), so the tolerance is 1e-5 relative to the largest magnitude
// of the CPU result (normwise: cancellation in a sum makes single elements'
// relative errors meaningless).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "SumBound.h"
#include "ir/Builder.h"
#include "ir/Cost.h"
#include "kernels/KernelRunner.h"
#include "kernels/cuda/CudaBackend.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>

namespace graphc {

/// Whether a CUDA device can be used (checked once).
bool cudaDeviceAvailable();

#define SKIP_WITHOUT_CUDA()                                                                        \
  do {                                                                                             \
    if (!::graphc::cudaDeviceAvailable())                                                          \
      GTEST_SKIP() << "no CUDA device";                                                            \
  } while (0)

/// The strict-FP32 backend of device 0, created once; null (and the test
/// failed) when creation fails on a machine that has a GPU.
CudaBackend *strictBackend();

/// One node over fresh inputs, in a module of its own.
class OneNode {
public:
  OneNode() : module_("cuda_test"), builder_(module_.main()) { module_.plan().batch = 1; }
  Value *input(llvm::StringRef name, TensorType t) { return builder_.input(name, std::move(t)); }
  Value *variable(Variable v) { return builder_.newVariable(std::move(v)); }
  /// Creates the node; a shape error fails the test and returns null.
  Node *node(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs = {}, llvm::StringRef name = "n");
  Module &module() { return module_; }
  Builder &builder() { return builder_; }

private:
  Module module_;
  Builder builder_;
};

/// Options of a GPU run.
struct CudaRun {
  TensorVariables *variables = nullptr; ///< copied to the device and back
  uint64_t step = 0, seed = 0;
  bool inPlace = false; ///< result 0 written over its in-place operand, if any
  /// When set, the step counter the kernel finds in device memory
  /// (KernelContext::deviceStep), as an executor's GPU device keeps it.
  std::optional<DeviceStep> deviceStep;
  CudaBackend *backend = nullptr; ///< default: strictBackend()
  /// The layouts the kernel is prepared with and gets its tensors in
  /// (empty: all plain). Inputs and results are plain here either way:
  /// runOnCuda stores channels-last ones transposed (toChannelsLast).
  std::vector<Layout> operandLayouts, resultLayouts;
  /// The kernel's policy: NCHW, the path the earlier GPU runs proved,
  /// unless a test asks for channels-last.
  GpuLayout gpuLayout = GpuLayout::Nchw;
};

/// A 4-D tensor's bytes in channels-last order (same type, NCHW shape), and
/// back: plain loops, the tests' reference for the layout copies.
Tensor toChannelsLast(const Tensor &t);
Tensor fromChannelsLast(const Tensor &stored);

/// Runs the node's CUDA kernel on copies of `inputs` and returns its
/// results; device errors (CudaBackend::takeDeviceError) come back too.
llvm::Expected<std::vector<Tensor>> runOnCuda(const Node &n, llvm::ArrayRef<Tensor> inputs,
                                              const CudaRun &run = {});

/// Creates the CUDA kernels of update nodes and runs them as one group
/// (Kernel::runGroup on the first), each with its inputs; `variables` are
/// copied to the device and back.
llvm::Error runGroupOnCuda(llvm::ArrayRef<const Node *> nodes,
                           llvm::ArrayRef<std::vector<Tensor>> inputs, TensorVariables &variables,
                           uint64_t step = 0);

/// The convolutions the CUDA convolution tests run (odd shapes, asymmetric
/// pads, groups, dilation, ceil mode, an empty batch).
struct ConvCase {
  Dims x, w;
  Ints pads, strides, dilations;
  int64_t group;
  bool ceil;
  Attrs attrs() const;
};
std::vector<ConvCase> convCases();
/// convCases() and inception_v3's 1x7 and 7x1 with their pads, channels a
/// multiple of 8 (what the 16-bit twins take).
std::vector<ConvCase> sixteenBitConvCases();

/// A ConvCase's nodes over inputs of `dtype`: inputs x, w (and b with
/// `bias`), the convolution, and without a bias its gradients over a fresh
/// input dy (data: {dy, w}; filter: {x, dy}). With `weights` the weights and
/// bias are of that type (f32 beside bf16 data, as --precision bf16 plans
/// them) and so is the filter gradient ({to = weights}). A node that fails
/// to build is null (and the test failed).
struct ConvNodes {
  std::vector<Value *> in;
  Node *conv = nullptr, *data = nullptr, *filter = nullptr;
};
ConvNodes convNodes(OneNode &c, const ConvCase &k, DType dtype, bool bias,
                    std::optional<DType> weights = std::nullopt);

/// Batch norm over x of `shape` and `dtype` (the per-channel operands f32):
/// inference {x, scale, bias, mean, var}, training {x, scale, bias} (also
/// with the fused ReLU, activation = "relu") and the gradient {x, scale,
/// mean, var, dy}, with random values for x, scale, bias, mean and var. A
/// node that fails to build is null.
struct BatchNormCase {
  Node *infer = nullptr, *train = nullptr, *trainRelu = nullptr, *grad = nullptr;
  Tensor x, scale, bias, mean, var;
};
BatchNormCase batchNormCase(OneNode &c, const Dims &shape, DType dtype, std::mt19937 &rng);

/// LayerNorm over x of `shape` from `axis` on (f32): the forward {x, scale[,
/// bias]} and the gradient {x, scale, dy}, both with `epsilon`. A node that
/// fails to build is null.
struct LayerNormCase {
  Dims shape;
  int64_t axis = -1;
  bool bias = true;
};
struct LayerNormNodes {
  Node *forward = nullptr, *grad = nullptr;
  TensorType x, scale; ///< scale (and bias): the normalized axes
};
LayerNormNodes layerNormNodes(OneNode &c, const LayerNormCase &k, double epsilon);

/// The pooling windows the CUDA pooling tests run (odd, asymmetric pads,
/// ceil mode, dilation): MaxPool with dilations, AveragePool without them and
/// with and without counting the padding. `what` describes the case.
struct PoolCase {
  Op op;
  bool includePad;
  Attrs attrs;
  std::string what;
};
std::vector<PoolCase> poolCases();

/// `a` without the attributes `op` does not take (ir/OpAttrs.def): one set
/// serves a family of ops.
Attrs takenBy(Op op, Attrs a);

/// The optimizer updates the CUDA update tests run: each op with its number
/// of slots and hyper-parameters away from the defaults (Nesterov, weight
/// decay, RMSProp's momentum).
struct UpdateCase {
  Op op;
  int slots;
  Attrs attrs;
};
std::vector<UpdateCase> updateCases();

/// Uniform random values in [lo, hi) of any dtype (integers rounded).
Tensor randomTensor(const TensorType &t, std::mt19937 &rng, double lo = -1, double hi = 1);
/// Integers in [-1, 1] (so that Equal holds now and then), or 0 and 1 for bool.
Tensor smallInts(const TensorType &t, std::mt19937 &rng);

/// max |got - want| / max |want| (0 when both are zero); NaN where one has
/// a NaN the other has not, or the shapes differ.
double relativeError(const Tensor &got, const Tensor &want);

/// Fails with the largest error's position when above `tol`.
::testing::AssertionResult closeTo(const Tensor &got, const Tensor &want, double tol = 1e-5);
/// Byte-wise equality, with the first differing element.
::testing::AssertionResult sameBits(const Tensor &got, const Tensor &want);

/// Nodes run on the CPU as they are added, then each node's CUDA kernel
/// against those results at the end (so the cases are built and checked on
/// the CPU everywhere, and only the GPU half skips without a GPU). Each
/// comparison with a tolerance prints its margin ("[ bound    ] ...",
/// tests/common/SumBound.h).
class TwinCases {
public:
  /// A fresh graph for the next node.
  OneNode &graph();
  /// Runs `n` on the CPU now and keeps its results (tol < 0: bit for bit);
  /// returns them (valid until the next add), or null (a failure recorded)
  /// when the CPU refuses `n`.
  const std::vector<Tensor> *add(const Node *n, std::vector<Tensor> inputs, double tol,
                                 std::string what = "", CudaRun run = {});
  /// `n`'s results on the GPU (run as `run` says) are to be `want`: for
  /// nodes whose CPU twin is another node (a fused op against its parts).
  void expect(const Node *n, std::vector<Tensor> inputs, std::vector<Tensor> want, double tol,
              std::string what = "", CudaRun run = {});
  /// The GPU half: each node's CUDA kernel against its CPU results.
  void compareOnGpu() const;

private:
  struct Case {
    const Node *node;
    std::vector<Tensor> inputs, cpu;
    double tol;
    std::string what;
    CudaRun run;
  };
  std::vector<std::unique_ptr<OneNode>> graphs_;
  std::vector<Case> cases_;
};

/// Runs `n` on the CPU and on the GPU over `inputs` and compares every
/// result (tol < 0: bit for bit; none given: both sides' rounding of the
/// node's sums, twice (K + 4)·u with K = sumLength(n), as each sums in its
/// own order, tests/common/SumBound.h); also with the result written in
/// place when the kernel allows it.
void expectTwins(const Node &n, llvm::ArrayRef<Tensor> inputs,
                 std::optional<double> tol = std::nullopt, uint64_t step = 0, uint64_t seed = 0);

} // namespace graphc
