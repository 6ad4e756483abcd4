//===- DnnlTestUtil.h - Running one kernel in chosen layouts ----*- C++ -*-===//
//
// Test helpers for the oneDNN kernels: a one-node module, a harness that
// creates a node's CPU kernel once and runs it with operands and results in
// chosen layouts (converting from and to plain by hand, filling results and
// scratch with NaN so unwritten elements show), and a tolerance check.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "kernels/Kernel.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

namespace graphc::test {

/// A module holding Input nodes of the given types and one node reading them.
struct OneNode {
  Module module;
  Node *node = nullptr;
};
llvm::Expected<std::unique_ptr<OneNode>> makeNode(Op op, llvm::ArrayRef<TensorType> inputs,
                                                  Attrs attrs);
/// The same, asserting success (for hand-written cases).
std::unique_ptr<OneNode> mustMakeNode(Op op, llvm::ArrayRef<TensorType> inputs, Attrs attrs);

/// A plain NCHW tensor in layout `l` (nChw<B>c with B = channelBlock(), or
/// NHWC) and back (same type, same bytes).
Tensor toLayout(const Tensor &plain, Layout l);
Tensor fromLayout(const Tensor &t, Layout l);

/// Creates a node's CPU kernel once; runs it on plain tensors, converting
/// operands and results to and from the layouts given.
class KernelHarness {
public:
  /// With layouts: prepare() is called with them. Without: every value is
  /// plain and prepare() is not called (the kernel sizes scratch for all).
  static llvm::Expected<std::unique_ptr<KernelHarness>>
  create(const Node &n,
         std::optional<std::pair<std::vector<Layout>, std::vector<Layout>>> layouts = std::nullopt,
         ConvAlgorithm algorithm = ConvAlgorithm::Auto, CpuLayout cpuLayout = CpuLayout::Auto);

  llvm::Expected<std::vector<Tensor>> run(llvm::ArrayRef<Tensor> inputs);
  Kernel &kernel() { return *kernel_; }

private:
  const Node *node_ = nullptr;
  std::unique_ptr<Kernel> kernel_;
  std::vector<Layout> in_, out_;
};

/// Runs a node once through a fresh harness (plain layouts).
std::vector<Tensor> runOnce(const Node &n, llvm::ArrayRef<Tensor> inputs,
                            ConvAlgorithm algorithm = ConvAlgorithm::Auto);
/// The same, also giving the implementations its kernel ran.
std::vector<Tensor> runOnce(const Node &n, llvm::ArrayRef<Tensor> inputs, ConvAlgorithm algorithm,
                            std::vector<PrimitiveInfo> &ran);

/// |got - want| <= rtol * (|want| + rms(want)) elementwise: relative error,
/// with the tensor's RMS as the floor near zero (sums that cancel). Also
/// reports the worst normalized error through `worst` when given.
testing::AssertionResult near(const Tensor &got, const Tensor &want, double rtol,
                              double *worst = nullptr);

/// The growth of a Winograd F(4, r)'s transforms: how many times u its
/// transforms' roundings can reach an output (Barabasz et al., "Error
/// analysis and improving the accuracy of Winograd convolution for deep
/// neural networks", 2020), from our tables. Along one axis ‖Aᵀ‖·‖G‖·‖Bᵀ‖,
/// each norm the larger of the infinity and 1-norms, since the gradients
/// apply the transposes (507 for F(4, 3), about 9,200 for F(4, 7)); in two
/// dimensions (F(4x4, 3x3), each transform applied on both sides) the product
/// of infinity norm times 1-norm of each (about 76,000 for F(4, 3)'s points,
/// the usual ones).
double winogradGrowth(int taps, bool twoD);

/// How far `n`'s results may be from a reference whose sums are grouped
/// otherwise: (sides · (K + 4) + growth) · u of their scale, K = sumLength(n)
/// (ir/Cost.h) and 4 roundings of the elementwise work around the sum (a
/// batch norm's normalization, a bias), u = 2^-24, sides 1 against a
/// reference that does not round
/// (float64), 2 against one that rounds in its own order; growth that of the
/// Winograd the kernel ran (`ran`: ours F(4, r), or oneDNN's F(4x4, 3x3)),
/// 0 for a direct computation.
double kernelBound(const Node &n, llvm::ArrayRef<PrimitiveInfo> ran, int sides);

/// Normal(0, 1) values.
Tensor randomTensor(const TensorType &t, std::mt19937 &rng);
/// sum(a * b) in double.
double dot(const Tensor &a, const Tensor &b);

inline TensorType f32(llvm::ArrayRef<int64_t> dims) {
  return TensorType(DType::F32, dims);
}

/// A convolution's attributes (ONNX order of pads: top, left, bottom, right).
Attrs convAttrs(Ints strides, Ints pads, Ints dilations, int64_t group);

/// Attributes from a list of (name, value).
Attrs attrs(std::initializer_list<std::pair<const char *, Attribute>> list);

/// One node of every oneDNN kernel that takes nChw<B>c (and channels-last),
/// f32, with channels that fill whole blocks.
struct Case {
  const char *name;
  Op op;
  std::vector<TensorType> inputs;
  Attrs attrs;
};
std::vector<Case> blockedCases();

/// Operand layouts and result layouts of one run.
using LayoutPair = std::pair<std::vector<Layout>, std::vector<Layout>>;
/// Every combination of layouts the kernel accepts, all-plain first.
std::vector<LayoutPair> layoutCombinations(const Kernel &k, const Node &n);

} // namespace graphc::test
