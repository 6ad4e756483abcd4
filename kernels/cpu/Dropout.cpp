//===- Dropout.cpp - Dropout at inference and in training -----------------===//
//
// Dropout (inference) is a copy. DropoutTrain {ratio, seed} gives y = x * mask
// and the mask itself, whose entries are 0 (probability `ratio`) or
// 1/(1-ratio), so the backward pass is one Mul.
//
// The mask is a pure function of (run seed, node, tower, step): its stream is
// RandomStream(env.seed, key), the key mixing a stable hash of the node's name
// without its tower prefix ("tower_1/drop" and "drop" hash alike), the node's
// tower index, the step and the node's `seed` attribute (a salt). So a rerun
// with the same seed draws the same masks and each tower draws its own. The
// tensor is cut into fixed blocks, each with its own derived stream, so the
// mask does not depend on how many threads drew it.
//
//===----------------------------------------------------------------------===//

#include "kernels/DropoutKey.h"
#include "kernels/cpu/PlainLoops.h"

namespace graphc {
namespace {

using namespace plain;

/// Elements per independently seeded block of the mask.
constexpr int64_t kMaskBlock = 4096;

class CopyKernel : public Kernel {
public:
  CopyKernel(const Node &, const KernelEnv &) {}
  llvm::Error run(KernelContext &ctx) override {
    if (ctx.outputs[0].data != ctx.inputs[0].data && ctx.outputs[0].bytes())
      std::memcpy(ctx.outputs[0].data, ctx.inputs[0].data, ctx.outputs[0].bytes());
    return llvm::Error::success();
  }
  bool acceptsLayout(unsigned, Layout) const override { return true; }
  bool producesLayout(unsigned, Layout) const override { return true; }
  bool layoutFollowsOperands() const override { return true; }
  std::optional<unsigned> inPlaceOperand() const override { return 0; }
};

class DropoutTrainKernel : public Kernel {
public:
  DropoutTrainKernel(const Node &n, const KernelEnv &env)
      : dtype_(n.result()->type().dtype), seed_(env.seed) {
    ratio_ = n.attrs().getFloat("ratio", 0.5);
    scale_ = dropoutScale(ratio_);
    threshold_ = dropoutThreshold(ratio_);
    key_ = dropoutNodeKey(n);
  }

  llvm::Error run(KernelContext &ctx) override {
    uint64_t stepKey = dropoutStepKey(key_, ctx.step, ctx.microStep);
    int64_t n = ctx.outputs[0].numElements();
    int64_t blocks = (n + kMaskBlock - 1) / kMaskBlock;
    visitFloat(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = ctx.inputs[0].as<const T>();
      T *y = ctx.outputs[0].as<T>(), *mask = ctx.outputs[1].as<T>();
      parallelFor(blocks, kGrain / kMaskBlock, [&](int64_t first, int64_t last) {
        float m[kMaskBlock], v[kMaskBlock];
        for (int64_t b = first; b < last; ++b) {
          int64_t begin = b * kMaskBlock, len = std::min(kMaskBlock, n - begin);
          RandomStream stream(seed_, mixedKey(stepKey + (uint64_t)b));
          // Each draw decides two elements by its 32-bit halves.
          for (int64_t i = 0; i < len; i += 2) {
            uint64_t r = stream.next();
            m[i] = (r & 0xffffffffu) < threshold_ ? 0.0f : scale_;
            if (i + 1 < len)
              m[i + 1] = (r >> 32) < threshold_ ? 0.0f : scale_;
          }
          loadFloats(v, x + begin, 1, len);
          for (int64_t i = 0; i < len; ++i)
            v[i] *= m[i];
          storeFloats(y + begin, v, len);
          storeFloats(mask + begin, m, len);
        }
      });
    });
    return llvm::Error::success();
  }

private:
  DType dtype_;
  uint64_t seed_, key_ = 0;
  double ratio_ = 0.5;
  uint64_t threshold_ = 0;
  float scale_ = 2;
};

} // namespace

void registerCpuDropoutKernels(KernelRegistry &r) {
  auto floats = {DType::F32, DType::F16, DType::BF16};
  r.add(Op::Dropout, DeviceKind::CPU, floats, makeFactory<CopyKernel>());
  r.add(Op::DropoutTrain, DeviceKind::CPU, floats, makeFactory<DropoutTrainKernel>());
}

} // namespace graphc
