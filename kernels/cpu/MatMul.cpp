//===- MatMul.cpp - Matrix products (oneDNN) -------------------------------===//
//
// MatMul (a, b): numpy matmul. A 1-d a is a row [1, K] and a 1-d b a column
// [K, 1], whose unit dimension the result drops; leading (batch) dimensions
// broadcast, which oneDNN's matmul does itself once both operands have the
// same rank (padded with leading 1s). The result is dense in the padded shape
// too, so it is written in place.
//
// Gemm (A, B[, C]): alpha * op(A) op(B) + beta * C, op transposing when
// transA/transB say so (a transposed operand is the same buffer described
// with swapped strides, not a copy). C broadcasts to [M, N]. With
// alpha = beta = 1 C is oneDNN's bias; otherwise alpha is oneDNN's output
// scale and beta * C is added after the product.
//
// Operands and results are plain; both are f32.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/cpu/DnnlCompat.h"
#include "kernels/cpu/DnnlKernel.h"

namespace graphc {
namespace {

constexpr size_t kMaxRank = 12; // oneDNN's DNNL_MAX_NDIMS

class MatMulKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

  llvm::Error build() override {
    Dims a(operandType(0).shape), b(operandType(1).shape);
    if (a.empty() || b.empty())
      return nodeError(node(), "operands must not be scalars");
    if (a.size() == 1)
      a.insert(a.begin(), 1);
    if (b.size() == 1)
      b.push_back(1);
    size_t rank = std::max(a.size(), b.size());
    if (rank > kMaxRank)
      return nodeError(node(),
                       "rank " + llvm::Twine(rank) + " exceeds oneDNN's " + llvm::Twine(kMaxRank));
    a.insert(a.begin(), rank - a.size(), 1);
    b.insert(b.begin(), rank - b.size(), 1);
    Dims c(rank);
    for (size_t i = 0; i + 2 < rank; ++i) {
      if (a[i] != b[i] && a[i] != 1 && b[i] != 1)
        return nodeError(node(), "batch dimensions " + shapeToString(a) + " and " +
                                     shapeToString(b) + " do not broadcast");
      c[i] = std::max(a[i], b[i]);
    }
    c[rank - 2] = a[rank - 2];
    c[rank - 1] = b[rank - 1];
    if (resultType(0).numElements() != TensorType(DType::F32, c).numElements())
      return nodeError(node(),
                       "result " + toString(resultType(0)) + " does not hold " + shapeToString(c));
    pd_ = onednn::matmulPd(plainDesc(a), plainDesc(b), dnnl::memory::desc(), plainDesc(c),
                           userScratchpad());
    prim_ = dnnl::matmul(pd_);
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &) const override {
    return roundScratch(pd_.scratchpad_desc().get_size());
  }

  void execute(KernelContext &ctx, Staging &s) override {
    s.execute(prim_, {{DNNL_ARG_SRC, dnnl::memory(pd_.src_desc(), s.engine(), ctx.inputs[0].data)},
         {DNNL_ARG_WEIGHTS, dnnl::memory(pd_.weights_desc(), s.engine(), ctx.inputs[1].data)},
         {DNNL_ARG_DST, dnnl::memory(pd_.dst_desc(), s.engine(), ctx.outputs[0].data)},
         {DNNL_ARG_SCRATCHPAD, s.temp(pd_.scratchpad_desc())}});
  }

private:
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
};

class GemmKernel : public DnnlKernel {
public:
  using DnnlKernel::DnnlKernel;

  llvm::Error build() override {
    if (auto e = readShapes())
      return e;
    auto f32 = dnnl::memory::data_type::f32;
    // A transposed operand: the stored [K, M] read as [M, K] through strides.
    dnnl::memory::desc da({m_, k_}, f32,
                          transA_ ? dnnl::memory::dims{1, m_} : dnnl::memory::dims{k_, 1});
    dnnl::memory::desc db({k_, n_}, f32,
                          transB_ ? dnnl::memory::dims{1, k_} : dnnl::memory::dims{n_, 1});
    biasC_ = hasC_ && alpha_ == 1 && beta_ == 1;
    dnnl::primitive_attr attr = userScratchpad();
    if (alpha_ != 1)
      alphaScale_.apply(attr, alpha_);
    auto bias = biasC_ ? plainDesc({cRows_, cCols_}) : dnnl::memory::desc();
    pd_ = onednn::matmulPd(da, db, bias, plainDesc({m_, n_}), attr);
    prim_ = dnnl::matmul(pd_);
    return llvm::Error::success();
  }

  size_t scratchFor(const Layouts &) const override {
    return roundScratch(pd_.scratchpad_desc().get_size());
  }

  void execute(KernelContext &ctx, Staging &s) override {
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(pd_.src_desc(), s.engine(), ctx.inputs[0].data)},
        {DNNL_ARG_WEIGHTS, dnnl::memory(pd_.weights_desc(), s.engine(), ctx.inputs[1].data)},
        {DNNL_ARG_DST, dnnl::memory(pd_.dst_desc(), s.engine(), ctx.outputs[0].data)},
        {DNNL_ARG_SCRATCHPAD, s.temp(pd_.scratchpad_desc())}};
    if (biasC_)
      args[DNNL_ARG_BIAS] = dnnl::memory(pd_.bias_desc(), s.engine(), ctx.inputs[2].data);
    if (alpha_ != 1)
      alphaScale_.addArgs(args);
    s.execute(prim_, args);
    if (!hasC_ || biasC_)
      return;
    s.stream().wait();
    addC(ctx);
  }

  // With K = 0 the product is zero and the result is beta * C.
  llvm::Error buildEmpty() override { return readShapes(); }
  void executeEmpty(KernelContext &ctx) override {
    DnnlKernel::executeEmpty(ctx);
    if (hasC_ && ctx.outputs[0].numElements() > 0)
      addC(ctx);
  }

private:
  llvm::Error readShapes() {
    const Dims &a = operandType(0).shape, &b = operandType(1).shape;
    if (a.size() != 2 || b.size() != 2)
      return nodeError(node(), "needs 2-d A and B");
    transA_ = node().attrs().getInt("transA");
    transB_ = node().attrs().getInt("transB");
    m_ = transA_ ? a[1] : a[0];
    k_ = transA_ ? a[0] : a[1];
    n_ = transB_ ? b[0] : b[1];
    if ((transB_ ? b[1] : b[0]) != k_)
      return nodeError(node(), "inner dimensions of A and B differ");
    alpha_ = (float)node().attrs().getFloat("alpha", 1.0);
    beta_ = (float)node().attrs().getFloat("beta", 1.0);
    if (node().numOperands() < 3 || beta_ == 0)
      return llvm::Error::success();
    const Dims &c = operandType(2).shape;
    if (c.size() > 2)
      return nodeError(node(), "C must have rank 0 to 2");
    cRows_ = c.size() == 2 ? c[0] : 1;
    cCols_ = c.empty() ? 1 : c.back();
    if ((cRows_ != 1 && cRows_ != m_) || (cCols_ != 1 && cCols_ != n_))
      return nodeError(node(), "C " + shapeToString(c) + " does not broadcast to [" +
                                   llvm::Twine(m_) + ", " + llvm::Twine(n_) + "]");
    hasC_ = true;
    return llvm::Error::success();
  }

  /// y += beta * C, C broadcast to [M, N].
  void addC(KernelContext &ctx) const {
    const float *c = ctx.inputs[2].as<float>();
    float *y = ctx.outputs[0].as<float>();
    int64_t rowStep = cRows_ == 1 ? 0 : cCols_, colStep = cCols_ == 1 ? 0 : 1;
#pragma omp parallel for
    for (int64_t i = 0; i < m_; ++i)
      for (int64_t j = 0; j < n_; ++j)
        y[i * n_ + j] += beta_ * c[i * rowStep + j * colStep];
  }

  bool transA_ = false, transB_ = false;
  float alpha_ = 1, beta_ = 1;
  int64_t m_ = 0, k_ = 0, n_ = 0, cRows_ = 1, cCols_ = 1;
  bool hasC_ = false, biasC_ = false;
  onednn::ProductScale alphaScale_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
};

} // namespace

void registerCpuMatMulKernels(KernelRegistry &r) {
  r.add(Op::MatMul, DeviceKind::CPU, DType::F32, dnnlFactory<MatMulKernel>());
  r.add(Op::Gemm, DeviceKind::CPU, DType::F32, dnnlFactory<GemmKernel>());
}

} // namespace graphc
