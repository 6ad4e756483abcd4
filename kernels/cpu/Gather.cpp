//===- Gather.cpp - Gather and its gradient (scatter-add) -----------------===//
//
// Gather {axis}(data, indices): data viewed as [pre, A, post], indices (i64
// or i32, any shape, K elements) pick rows along A; negative indices count
// from the end. GatherGrad {axis, data_shape}(indices, dy): zeros, then
// dx[p, idx[k], :] += dy[p, k, :], so repeated indices accumulate.
//
// Indices are checked before anything is written; one outside [-A, A) is an
// error naming the node, the index's position and its value. The scatter
// never lets two threads touch one output element (it splits over `pre` or
// over columns), so it is deterministic.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/cpu/PlainLoops.h"

namespace graphc {
namespace {

using namespace plain;

/// Reads indices into `out`, wrapping negatives; an error names the bad one.
llvm::Error normalizeIndices(const Node &n, const TensorView &indices, int64_t dim, int64_t *out) {
  int64_t count = indices.numElements();
  bool wide = indices.dtype == DType::I64;
  for (int64_t k = 0; k < count; ++k) {
    int64_t v = wide ? indices.as<const int64_t>()[k] : indices.as<const int32_t>()[k];
    if (v < -dim || v >= dim)
      return nodeError(n, "index " + llvm::Twine(v) + " at position " + llvm::Twine(k) +
                              " is out of range for an axis of size " + llvm::Twine(dim));
    out[k] = v < 0 ? v + dim : v;
  }
  return llvm::Error::success();
}

/// [pre, A, post] around `axis` of `data`.
struct GatherGeometry {
  int64_t pre = 1, dim = 0, post = 1, count = 0;
  GatherGeometry(llvm::ArrayRef<int64_t> data, int64_t axis, int64_t indices) : count(indices) {
    if (axis < 0)
      axis += (int64_t)data.size();
    pre = product(data, 0, axis);
    dim = data[axis];
    post = product(data, axis + 1, data.size());
  }
};

class GatherKernel : public Kernel {
public:
  GatherKernel(const Node &n, const KernelEnv &)
      : node_(&n), geo_(n.operand(0)->type().shape, n.attrs().getInt("axis"),
                        n.operand(1)->type().numElements()),
        elemSize_(dtypeSize(n.operand(0)->type().dtype)) {}

  size_t scratchBytes() const override { return geo_.count * sizeof(int64_t); }

  llvm::Error run(KernelContext &ctx) override {
    auto *idx = static_cast<int64_t *>(ctx.scratch);
    if (auto e = normalizeIndices(*node_, ctx.inputs[1], geo_.dim, idx))
      return e;
    const auto *data = static_cast<const char *>(ctx.inputs[0].data);
    auto *out = static_cast<char *>(ctx.outputs[0].data);
    int64_t rowBytes = geo_.post * (int64_t)elemSize_, k = geo_.count, dim = geo_.dim;
    if (rowBytes == 0)
      return llvm::Error::success();
    parallelFor(geo_.pre * k, std::max<int64_t>(1, (kGrain * 4) / rowBytes),
                [&](int64_t begin, int64_t end) {
                  for (int64_t w = begin; w < end; ++w) {
                    int64_t p = w / k, j = w % k;
                    std::memcpy(out + w * rowBytes, data + (p * dim + idx[j]) * rowBytes, rowBytes);
                  }
                });
    return llvm::Error::success();
  }

private:
  const Node *node_;
  GatherGeometry geo_;
  size_t elemSize_;
};

class GatherGradKernel : public Kernel {
public:
  GatherGradKernel(const Node &n, const KernelEnv &)
      : node_(&n), geo_(n.result()->type().shape, n.attrs().getInt("axis"),
                        n.operand(0)->type().numElements()) {}

  size_t scratchBytes() const override { return geo_.count * sizeof(int64_t); }

  llvm::Error run(KernelContext &ctx) override {
    auto *idx = static_cast<int64_t *>(ctx.scratch);
    if (auto e = normalizeIndices(*node_, ctx.inputs[0], geo_.dim, idx))
      return e;
    const float *dy = ctx.inputs[1].as<const float>();
    float *dx = ctx.outputs[0].as<float>();
    int64_t pre = geo_.pre, dim = geo_.dim, post = geo_.post, k = geo_.count;
    if (ctx.outputs[0].bytes())
      std::memset(dx, 0, ctx.outputs[0].bytes());
    auto scatter = [&](int64_t p, int64_t c0, int64_t c1) {
      for (int64_t j = 0; j < k; ++j) {
        float *to = dx + (p * dim + idx[j]) * post;
        const float *from = dy + (p * k + j) * post;
        for (int64_t c = c0; c < c1; ++c)
          to[c] += from[c];
      }
    };
    int64_t work = pre * k * post;
    if (pre > 1 || work < 2 * kGrain) {
      parallelFor(pre, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, k * post)),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t p = begin; p < end; ++p)
                      scatter(p, 0, post);
                  });
    } else {
      parallelFor(post, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, k)),
                  [&](int64_t begin, int64_t end) { scatter(0, begin, end); });
    }
    return llvm::Error::success();
  }

private:
  const Node *node_;
  GatherGeometry geo_;
};

} // namespace

void registerCpuGatherKernels(KernelRegistry &r) {
  const auto cpu = DeviceKind::CPU;
  r.add(Op::Gather, cpu, {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool},
        makeFactory<GatherKernel>());
  // Keyed by the indices' dtype (operand 0); the gradient itself is f32.
  r.add(Op::GatherGrad, cpu, {DType::I64, DType::I32},
        [](const Node &n, const KernelEnv &env) -> llvm::Expected<std::unique_ptr<Kernel>> {
          if (n.operand(1)->type().dtype != DType::F32)
            return nodeError(n, "the CPU kernel scatters f32 gradients only, not " +
                                    dtypeName(n.operand(1)->type().dtype));
          return std::make_unique<GatherGradKernel>(n, env);
        });
}

} // namespace graphc
