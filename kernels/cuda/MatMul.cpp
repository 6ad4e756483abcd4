//===- MatMul.cpp - MatMul and Gemm through cuBLAS ------------------------===//
//
// The CUDA twins of kernels/cpu/MatMul.cpp. MatMul (numpy matmul, batch
// dimensions broadcast) and the product of Gemm (alpha * op(A) op(B)) are one
// cuBLAS call each, planned by GemmPlan.h; Gemm's beta * C (C broadcast to
// [M, N]) is then added by our broadcast kernel, as the CPU kernel adds it
// after its primitive. f32, TF32 per the backend's switch (the handle's math
// mode). cuBLAS gets a workspace from the kernel's scratch, so it never
// allocates while a step is captured into a CUDA graph. With K = 0 the
// product is zero without a cuBLAS call.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/ElementwiseDevice.h"
#include "kernels/cuda/GemmDevice.h"
#include "kernels/cuda/GemmPlan.h"

namespace graphc {
namespace {

using namespace cuda;

/// cuBLAS's workspace (its recommended size for Hopper).
constexpr size_t kCublasWorkspace = size_t(32) << 20;

class GemmKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    bool gemm = node().op() == Op::Gemm;
    auto plan = gemm ? planGemm(node()) : planMatMul(node());
    if (!plan)
      return plan.takeError();
    plan_ = *plan;
    if (!gemm || node().numOperands() < 3)
      return llvm::Error::success();
    beta_ = (float)node().attrs().getFloat("beta", 1.0);
    if (beta_ == 0)
      return llvm::Error::success();
    const Dims &c = operandType(2).shape;
    if (c.size() > 2)
      return makeError("C must have rank 0 to 2");
    auto index = broadcastIndex2(node(), {plan_.m, plan_.n}, {plan_.m, plan_.n}, c);
    if (!index)
      return index.takeError();
    cIndex_ = *index;
    hasC_ = true;
    return llvm::Error::success();
  }

  size_t scratchBytes() const override { return layout(nullptr).bytes(); }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    cudaStream_t s = streamOf(ctx);
    const GemmPlan &p = plan_;
    float *c = ctx.outputs[0].as<float>();
    int64_t outputs = p.m * p.n * p.batch;
    if (outputs == 0 || ctx.outputs[0].numElements() == 0)
      return llvm::Error::success();
    // An empty operand: the product is a sum over nothing (cuBLAS refuses it).
    if (p.k == 0 || ctx.inputs[0].numElements() == 0 || ctx.inputs[1].numElements() == 0) {
      GRAPHC_CUDA_TRY(cudaMemsetAsync(c, 0, (size_t)outputs * sizeof(float), s));
    } else if (auto e = product(ctx, c)) {
      return e;
    }
    if (hasC_) {
      ElemParams scaled;
      scaled.alpha = beta_;
      GRAPHC_CUDA_TRY(launchBinary(BinaryOp::AddScaled, ElemType::F32, scaled, cIndex_, outputs, c,
                                   c, ctx.inputs[2].data, s));
    }
    return llvm::Error::success();
  }

private:
  /// Scratch: cuBLAS's workspace, then the pointer arrays.
  ScratchLayout layout(void *base) const {
    ScratchLayout l(base);
    l.take(kCublasWorkspace);
    if (size_t bytes = pointerArrayBytes(plan_))
      l.take(bytes);
    return l;
  }

  llvm::Error product(KernelContext &ctx, float *c) {
    const GemmPlan &p = plan_;
    cudaStream_t s = streamOf(ctx);
    const float *a = ctx.inputs[0].as<const float>(), *b = ctx.inputs[1].as<const float>();
    // The pieces layout() sized, taken in its order from the start of the scratch.
    ScratchLayout l(ctx.scratch);
    void *workspace = l.take(kCublasWorkspace);
    void **pointers = nullptr;
    if (p.form == GemmForm::PointerArray) {
      pointers = static_cast<void **>(l.take(pointerArrayBytes(p)));
      GRAPHC_CUDA_TRY(launchBatchPointers(p.batchIndex, p.batch, a, b, c, p.strideC, pointers, s));
    }
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
    cublasOperation_t opA = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    int m = (int)p.m, n = (int)p.n, k = (int)p.k;
    int lda = (int)p.lda, ldb = (int)p.ldb, ldc = (int)p.ldc;
    const float alpha = p.alpha, zero = 0;
    const CublasApi &api = libs().cublas;
    cublasHandle_t h = backend().cublas();
    std::lock_guard<std::mutex> lock(backend().handleMutex());
    GRAPHC_CUBLAS_TRY(api, api.cublasSetStream_v2(h, s));
    GRAPHC_CUBLAS_TRY(api, api.cublasSetWorkspace_v2(h, workspace, kCublasWorkspace));
    switch (p.form) {
    case GemmForm::Single:
      GRAPHC_CUBLAS_TRY(
          api, api.cublasSgemm_v2(h, opB, opA, n, m, k, &alpha, b, ldb, a, lda, &zero, c, ldc));
      break;
    case GemmForm::Strided:
      GRAPHC_CUBLAS_TRY(api, api.cublasSgemmStridedBatched(h, opB, opA, n, m, k, &alpha, b, ldb,
                                                           p.strideB, a, lda, p.strideA, &zero, c,
                                                           ldc, p.strideC, (int)p.batch));
      break;
    case GemmForm::PointerArray: {
      auto *as = reinterpret_cast<const float *const *>(pointers);
      auto *bs = reinterpret_cast<const float *const *>(pointers + p.batch);
      auto *cs = reinterpret_cast<float *const *>(pointers + 2 * p.batch);
      GRAPHC_CUBLAS_TRY(api, api.cublasSgemmBatched(h, opB, opA, n, m, k, &alpha, bs, ldb, as, lda,
                                                    &zero, cs, ldc, (int)p.batch));
      break;
    }
    }
    return llvm::Error::success();
  }

  GemmPlan plan_;
  bool hasC_ = false;
  float beta_ = 1;
  StridedIndex<2> cIndex_;
};

} // namespace

void registerCudaMatMulKernels(KernelRegistry &r) {
  for (Op op : {Op::MatMul, Op::Gemm})
    r.add(op, DeviceKind::GPU, DType::F32, cudaFactory<GemmKernel>());
}

} // namespace graphc
