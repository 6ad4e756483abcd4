//===- Dropout.cpp - DropoutTrain on CUDA ---------------------------------===//
//
// The CUDA twin of DropoutTrain in kernels/cpu/Dropout.cpp: the same node key
// (the name without its tower prefix, the tower, the `seed` salt), the same
// per-step key, threshold and scale, and device streams equal to the CPU's
// (DropoutDevice.h), so masks match bit for bit; a host test checks the
// device's draw order against the CPU kernel. (Dropout at inference is a
// copy, in Elementwise.cpp.)
//
//===----------------------------------------------------------------------===//

#include "ir/Random.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/DropoutDevice.h"
#include "kernels/cuda/KernelPlans.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>

namespace graphc {
namespace cuda {

/// The name without a leading "tower<N>/" or "tower_<N>/" component.
static llvm::StringRef withoutTowerPrefix(llvm::StringRef name) {
  llvm::StringRef rest = name;
  if (!rest.consume_front("tower"))
    return name;
  rest.consume_front("_");
  size_t digits = 0;
  while (digits < rest.size() && llvm::isDigit(rest[digits]))
    ++digits;
  if (digits == 0 || digits >= rest.size() || rest[digits] != '/')
    return name;
  return rest.drop_front(digits + 1);
}

DropoutParams dropoutParams(const Node &n, uint64_t seed, uint64_t step) {
  double ratio = n.attrs().getFloat("ratio", 0.5);
  DropoutParams p;
  p.seed = seed;
  p.scale = ratio < 1 ? (float)(1.0 / (1.0 - ratio)) : 0.0f;
  p.threshold = (uint64_t)std::ldexp(std::clamp(ratio, 0.0, 1.0), 32);
  uint64_t key = stableHash(withoutTowerPrefix(n.name()));
  key = mix64(key ^ ((uint64_t)(n.tower() + 1) * 0x9e3779b97f4a7c15ull));
  key = mix64(key ^ (uint64_t)n.attrs().getInt("seed"));
  p.stepKey = mix64(key ^ (step * 0xbf58476d1ce4e5b9ull));
  return p;
}

} // namespace cuda

namespace {

using namespace cuda;

class DropoutTrainKernel : public CudaKernel {
public:
  DropoutTrainKernel(const Node &n, const KernelEnv &env) : CudaKernel(n, env), seed_(env.seed) {}

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    DropoutParams p = dropoutParams(node(), seed_, ctx.step);
    GRAPHC_CUDA_TRY(launchDropoutTrain((int)resultType().dtype, p, ctx.outputs[0].numElements(),
                                       ctx.inputs[0].data, ctx.outputs[0].data, ctx.outputs[1].data,
                                       streamOf(ctx)));
    return llvm::Error::success();
  }

private:
  uint64_t seed_;
};

} // namespace

void registerCudaDropoutKernels(KernelRegistry &r) {
  r.add(Op::DropoutTrain, DeviceKind::CUDA, {DType::F32, DType::F16, DType::BF16},
        cudaFactory<DropoutTrainKernel>());
}

} // namespace graphc
