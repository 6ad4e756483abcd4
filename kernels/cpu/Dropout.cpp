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
// A per-sample or per-tensor mask (`mask`, ir/DropoutMask.h; stochastic
// depth) is the element mask of its own shape, [N,1,...] or [1,...]: its N
// values are drawn exactly as an element mask of N elements would be, and
// every element of sample s is multiplied by value s. The batch axis is the
// outermost, so sample s is elements [s * inner, (s + 1) * inner).
//
//===----------------------------------------------------------------------===//

#include "ir/DropoutMask.h"
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
    perElement_ = dropoutMaskOf(n) == DropoutMask::Element;
  }

  llvm::Error run(KernelContext &ctx) override {
    uint64_t stepKey = dropoutStepKey(key_, ctx.step, ctx.microStep);
    visitFloat(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = ctx.inputs[0].as<const T>();
      T *y = ctx.outputs[0].as<T>(), *mask = ctx.outputs[1].as<T>();
      if (perElement_)
        dropElements(stepKey, ctx.outputs[0].numElements(), x, y, mask);
      else
        dropSamples(stepKey, ctx.outputs[0].numElements(), ctx.outputs[1].numElements(), x, y,
                    mask);
    });
    return llvm::Error::success();
  }

private:
  /// Mask values [b * kMaskBlock, + len) into m: block b's own stream, each
  /// draw deciding two values by its 32-bit halves.
  void drawBlock(uint64_t stepKey, int64_t b, int64_t len, float *m) const {
    RandomStream stream(seed_, mixedKey(stepKey + (uint64_t)b));
    for (int64_t i = 0; i < len; i += 2) {
      uint64_t r = stream.next();
      m[i] = (r & 0xffffffffu) < threshold_ ? 0.0f : scale_;
      if (i + 1 < len)
        m[i + 1] = (r >> 32) < threshold_ ? 0.0f : scale_;
    }
  }

  template <typename T>
  void dropElements(uint64_t stepKey, int64_t n, const T *x, T *y, T *mask) const {
    int64_t blocks = (n + kMaskBlock - 1) / kMaskBlock;
    parallelFor(blocks, kGrain / kMaskBlock, [&](int64_t first, int64_t last) {
      float m[kMaskBlock], v[kMaskBlock];
      for (int64_t b = first; b < last; ++b) {
        int64_t begin = b * kMaskBlock, len = std::min(kMaskBlock, n - begin);
        drawBlock(stepKey, b, len, m);
        loadFloats(v, x + begin, 1, len);
        for (int64_t i = 0; i < len; ++i)
          v[i] *= m[i];
        storeFloats(y + begin, v, len);
        storeFloats(mask + begin, m, len);
      }
    });
  }

  /// `samples` mask values, each scaling n / samples consecutive elements.
  template <typename T>
  void dropSamples(uint64_t stepKey, int64_t n, int64_t samples, const T *x, T *y, T *mask) const {
    std::vector<float> m(samples);
    for (int64_t b = 0; b * kMaskBlock < samples; ++b)
      drawBlock(stepKey, b, std::min(kMaskBlock, samples - b * kMaskBlock), &m[b * kMaskBlock]);
    storeFloats(mask, m.data(), samples);
    int64_t inner = samples ? n / samples : 0;
    parallelFor(n, kGrain, [&](int64_t first, int64_t last) {
      float v[kMaskBlock];
      for (int64_t begin = first; begin < last; begin += kMaskBlock) {
        int64_t len = std::min(kMaskBlock, last - begin);
        loadFloats(v, x + begin, 1, len);
        for (int64_t i = 0; i < len; ++i)
          v[i] *= m[(begin + i) / inner];
        storeFloats(y + begin, v, len);
      }
    });
  }

  DType dtype_;
  uint64_t seed_, key_ = 0;
  double ratio_ = 0.5;
  uint64_t threshold_ = 0;
  float scale_ = 2;
  bool perElement_ = true;
};

} // namespace

void registerCpuDropoutKernels(KernelRegistry &r) {
  auto floats = {DType::F32, DType::F16, DType::BF16};
  r.add(Op::Dropout, DeviceKind::CPU, floats, makeFactory<CopyKernel>());
  r.add(Op::DropoutTrain, DeviceKind::CPU, floats, makeFactory<DropoutTrainKernel>());
}

} // namespace graphc
