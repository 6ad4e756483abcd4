//===- BatchNormPlanTest.cpp - The CUDA batch norm's walk, run on the host ===//
//
// No GPU needed: BatchNormPlan.h's walk and sums run on the CPU as the
// device runs them (every block's items, every thread's chunks, the float
// and double sums, the block's tree, the merge's order; BatchNormDevice.h's
// per-element formulas), NCHW and channels-last, against kernels/cpu's batch
// norms on inception_v3's channel counts and spatial sizes (batches scaled
// down), C = 1 and N * S = 1. Tolerances (f32): the statistics within 1e-6
// of the CPU's double sums (ours: float over kBnFlush chunks of one
// element each, then double); y within 1e-5 (one rounding of each formula
// step); the gradient within (K + 4)·u of the CPU's f32 sums of K terms
// (tests/common/SumBound.h). Also: every element is visited once and every
// partial written once, and the results are the same bits whatever the
// number of blocks.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "kernels/cuda/BatchNormDevice.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace graphc {
namespace {

using namespace cuda;

std::vector<Tensor> cpuRun(const Node &n, llvm::ArrayRef<Tensor> in) {
  auto out = runNode(n, in);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return {};
  }
  return std::move(*out);
}

BnPlan planOf(const Dims &shape, bool channelsLast, int elementBytes) {
  int64_t s = 1;
  for (size_t d = 2; d < shape.size(); ++d)
    s *= shape[d];
  return planBatchNorm(shape[0], shape[1], s, channelsLast, elementBytes);
}

/// The chunks of thread t working on `item`, as (offset, channel) per element.
template <typename F> void forEachElement(const BnPlan &p, int64_t item, int t, F &&f) {
  BnThreadWalk w = bnWalk(p, item, t);
  if (!w.active)
    return;
  for (int64_t m = w.first; m < w.end; m += w.step)
    for (int k = 0; k < p.vec; ++k)
      f(bnOffset(p, m, w.channel) + k, bnChunkChannel(p, w.channel, k));
}

/// The sums pass and the merge as the device runs them: `blocks` blocks
/// taking items in a grid-stride loop, each thread's sums (bnAccumulate),
/// the block's tree over its row lanes per channel, then per channel the
/// merge's order over the tiles. `termFor(walk)` is a thread's term.
template <int V, typename TermFor>
std::vector<BnSums> emulateSums(const BnPlan &p, int blocks, TermFor termFor) {
  std::vector<BnSums> partials(p.partials());
  std::vector<int> written(p.partials(), 0);
  for (int b = 0; b < blocks; ++b)
    for (int64_t item = b; item < p.items(); item += blocks) {
      std::vector<BnThreadWalk> w(kBnThreads);
      std::vector<BnAccumulator<V>> acc(kBnThreads);
      for (int t = 0; t < kBnThreads; ++t) {
        w[t] = bnWalk(p, item, t);
        acc[t] = bnAccumulate<V>(p, w[t], termFor(w[t]));
      }
      for (int k = 0; k < (p.channelsLast ? V : 1); ++k)
        for (int tx = 0; tx < p.lanes; ++tx) {
          std::vector<BnSums> column(p.rowLanes);
          for (int ty = 0; ty < p.rowLanes; ++ty) {
            const BnAccumulator<V> &a = acc[ty * p.lanes + tx];
            column[ty] = p.channelsLast ? a.sums[k] : a.combined();
          }
          bnTreeSum(column.data(), p.rowLanes);
          int64_t slot = w[tx].tile * p.c + bnChunkChannel(p, w[tx].channel, k);
          partials[slot] = column[0];
          ++written[slot];
        }
    }
  for (size_t i = 0; i < written.size(); ++i)
    EXPECT_EQ(written[i], 1) << "partial " << i;
  std::vector<BnSums> merged(p.c);
  const int count = p.tiles < kBnThreads ? (int)p.tiles : kBnThreads;
  for (int64_t c = 0; c < p.c; ++c) {
    std::vector<BnSums> sh(kBnThreads);
    for (int t = 0; t < kBnThreads; ++t)
      for (int64_t k = t; k < p.tiles; k += kBnThreads)
        sh[t].add(partials[k * p.c + c]);
    bnTreeSum(sh.data(), count);
    merged[c] = sh[0];
  }
  return merged;
}

template <int V> struct StatsTerm {
  const float *x;
  float pivot[V];
  void operator()(int64_t off, int64_t, float (&p)[V], float (&q)[V]) const {
    for (int k = 0; k < V; ++k) {
      p[k] = x[off + k] - pivot[k];
      q[k] = p[k] * p[k];
    }
  }
};

template <int V> struct GradTerm {
  const float *x, *dy, *y;
  float mean[V];
  void operator()(int64_t off, int64_t, float (&p)[V], float (&q)[V]) const {
    for (int k = 0; k < V; ++k) {
      p[k] = bnMaskedGradient(dy[off + k], y != nullptr, y ? y[off + k] : 0.0f);
      q[k] = p[k] * (x[off + k] - mean[k]);
    }
  }
};

/// The device's passes over f32 tensors stored in the plan's layout.
struct Emulated {
  BnPlan p;
  int blocks = 7;

  template <typename F> auto withVec(F &&f) const {
    constexpr int wide = kBnChunkBytes / 4;
    return p.vec == wide ? f(std::integral_constant<int, wide>{})
                         : f(std::integral_constant<int, 1>{});
  }

  void statistics(const float *x, float *mean, float *var) const {
    withVec([&](auto vec) {
      constexpr int V = decltype(vec)::value;
      auto sums = emulateSums<V>(p, blocks, [&](const BnThreadWalk &w) {
        StatsTerm<V> term{x, {}};
        for (int k = 0; k < V; ++k)
          term.pivot[k] = w.active ? x[bnOffset(p, 0, bnChunkChannel(p, w.channel, k))] : 0.0f;
        return term;
      });
      for (int64_t c = 0; c < p.c; ++c)
        bnStatistics(sums[c], p.positions(), x[bnOffset(p, 0, c)], mean[c], var[c]);
      return 0;
    });
  }

  void forward(float eps, bool relu, const float *x, const float *scale, const float *bias,
               const float *mean, const float *var, float *y) const {
    for (int64_t item = 0; item < p.items(); ++item)
      for (int t = 0; t < kBnThreads; ++t)
        forEachElement(p, item, t, [&](int64_t off, int64_t c) {
          y[off] =
              bnForward(bnForwardChannel(scale[c], bias[c], mean[c], var[c], eps), relu, x[off]);
        });
  }

  void gradient(float eps, const float *x, const float *dy, const float *y, const float *scale,
                const float *mean, const float *var, float *dx, float *dscale, float *dbias) const {
    withVec([&](auto vec) {
      constexpr int V = decltype(vec)::value;
      auto sums = emulateSums<V>(p, blocks, [&](const BnThreadWalk &w) {
        GradTerm<V> term{x, dy, y, {}};
        for (int k = 0; k < V; ++k)
          term.mean[k] = w.active ? mean[bnChunkChannel(p, w.channel, k)] : 0.0f;
        return term;
      });
      for (int64_t c = 0; c < p.c; ++c)
        bnGradientSums(sums[c], var[c], eps, dscale[c], dbias[c]);
      return 0;
    });
    for (int64_t item = 0; item < p.items(); ++item)
      for (int t = 0; t < kBnThreads; ++t)
        forEachElement(p, item, t, [&](int64_t off, int64_t c) {
          BnBackwardChannel k =
              bnBackwardChannel(scale[c], mean[c], var[c], dscale[c], dbias[c], eps, p.positions());
          dx[off] = bnBackward(k, x[off], bnMaskedGradient(dy[off], y != nullptr, y ? y[off] : 0));
        });
  }
};

/// inception_v3's channel counts and spatial sizes, batches scaled down,
/// and the edges: one channel, one position per channel, ranks 2, 3 and 5.
std::vector<Dims> shapes() {
  return {{2, 32, 147, 147}, {2, 64, 73, 73}, {4, 192, 35, 35}, {2, 288, 35, 35}, {4, 768, 17, 17},
          {4, 1280, 8, 8},   {8, 2048, 8, 8}, {3, 80, 9, 9},    {5, 1, 7, 7},     {1, 3, 1, 1},
          {16, 3},           {3, 5, 7},       {1, 4, 3, 2, 2},  {128, 64, 1, 1}};
}

TEST(BatchNormPlan, EveryElementOnceAndEveryTileOfEveryChannel) {
  for (const Dims &shape : shapes())
    for (bool last : {false, true})
      for (int bytes : {2, 4}) {
        if (last && shape.size() != 4)
          continue;
        BnPlan p = planOf(shape, last, bytes);
        const std::string what =
            shapeToString(shape) + (last ? " NHWC " : " NCHW ") + std::to_string(bytes) + " bytes";
        EXPECT_GE(p.tileLen, p.sweep() * kBnMinSweeps) << what;
        EXPECT_EQ(p.tileLen % p.sweep(), 0) << what;
        EXPECT_EQ(p.vec == kBnChunkBytes / bytes,
                  (last ? shape[1] : p.s) % (kBnChunkBytes / bytes) == 0)
            << what;
        EXPECT_LE(p.lanes * p.rowLanes, kBnThreads) << what;
        std::vector<int> seen(p.elements(), 0);
        bool channelsRight = true;
        for (int64_t item = 0; item < p.items(); ++item)
          for (int t = 0; t < kBnThreads; ++t)
            forEachElement(p, item, t, [&](int64_t off, int64_t c) {
              ++seen[off];
              // The channel of an element of the stored tensor.
              int64_t want = last ? off % p.c : off / p.s % p.c;
              channelsRight &= c == want;
            });
        EXPECT_TRUE(channelsRight) << what;
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), (long)seen.size()) << what;
      }
}

TEST(BatchNormPlan, InceptionBatch128TilesKeepTheGpuBusy) {
  // The shapes the GPU runs (batch 128): enough items for every SM, and a
  // thread's chunks at least kBnMinSweeps per tile.
  for (Dims shape : {Dims{128, 32, 147, 147}, Dims{128, 192, 35, 35}, Dims{128, 2048, 8, 8}})
    for (bool last : {false, true}) {
      BnPlan p = planOf(shape, last, 2);
      EXPECT_GE(p.items(), 1024) << shapeToString(shape);
      EXPECT_LE(p.partials() * (int64_t)sizeof(BnSums), 16 << 20) << shapeToString(shape);
    }
}

TEST(BatchNormPlan, EmulatedPassesMatchTheCpuKernels) {
  std::mt19937 rng(29);
  for (const Dims &shape : shapes()) {
    OneNode c;
    BatchNormCase k = batchNormCase(c, shape, DType::F32, rng);
    ASSERT_TRUE(k.infer && k.train && k.trainRelu && k.grad);
    const float eps = 1e-3f;
    std::vector<Tensor> train = cpuRun(*k.train, {k.x, k.scale, k.bias});
    std::vector<Tensor> trainRelu = cpuRun(*k.trainRelu, {k.x, k.scale, k.bias});
    std::vector<Tensor> infer = cpuRun(*k.infer, {k.x, k.scale, k.bias, k.mean, k.var});
    ASSERT_EQ(train.size(), 3u);
    ASSERT_EQ(trainRelu.size(), 3u);
    Tensor dy = randomTensor(k.x.type(), rng);
    std::vector<Tensor> grad = cpuRun(*k.grad, {k.x, k.scale, train[1], train[2], dy});
    // The fused gradient against the CPU's on dy masked where y <= 0.
    Tensor maskedDy = dy.clone();
    for (int64_t i = 0; i < dy.numElements(); ++i)
      if (!(trainRelu[0].data<float>()[i] > 0))
        maskedDy.data<float>()[i] = 0;
    std::vector<Tensor> gradRelu =
        cpuRun(*k.grad, {k.x, k.scale, trainRelu[1], trainRelu[2], maskedDy});
    const double gradBound = sumbound::bound(sumLength(*k.grad) + 4);

    for (bool last : {false, true}) {
      if (last && shape.size() != 4)
        continue;
      const std::string what = shapeToString(shape) + (last ? " NHWC" : " NCHW");
      auto stored = [&](const Tensor &t) { return last ? toChannelsLast(t) : t; };
      auto plain = [&](const Tensor &t) { return last ? fromChannelsLast(t) : t; };
      Emulated e{planOf(shape, last, 4)};
      const TensorType ct = k.scale.type();
      Tensor x = stored(k.x), mean(ct), var(ct), y(k.x.type());
      e.statistics(x.data<float>(), mean.data<float>(), var.data<float>());
      EXPECT_TRUE(closeTo(mean, train[1], 1e-6)) << what << " mean";
      EXPECT_TRUE(closeTo(var, train[2], 1e-6)) << what << " var";
      for (bool relu : {false, true}) {
        e.forward(eps, relu, x.data<float>(), k.scale.data<float>(), k.bias.data<float>(),
                  mean.data<float>(), var.data<float>(), y.data<float>());
        EXPECT_TRUE(closeTo(plain(y), relu ? trainRelu[0] : train[0], 1e-5))
            << what << (relu ? " relu" : "");
      }
      e.forward(eps, false, x.data<float>(), k.scale.data<float>(), k.bias.data<float>(),
                k.mean.data<float>(), k.var.data<float>(), y.data<float>());
      EXPECT_TRUE(closeTo(plain(y), infer[0], 1e-5)) << what << " inference";

      for (bool masked : {false, true}) {
        const std::vector<Tensor> &want = masked ? gradRelu : grad;
        const std::vector<Tensor> &stats = masked ? trainRelu : train;
        Tensor dx(k.x.type()), dscale(ct), dbias(ct), dys = stored(dy), ys = stored(trainRelu[0]);
        e.gradient(eps, x.data<float>(), dys.data<float>(), masked ? ys.data<float>() : nullptr,
                   k.scale.data<float>(), stats[1].data<float>(), stats[2].data<float>(),
                   dx.data<float>(), dscale.data<float>(), dbias.data<float>());
        const std::string g = what + (masked ? " gradient, ReLU mask" : " gradient");
        EXPECT_TRUE(closeTo(plain(dx), want[0], gradBound)) << g;
        EXPECT_TRUE(closeTo(dscale, want[1], gradBound)) << g;
        EXPECT_TRUE(closeTo(dbias, want[2], gradBound)) << g;
      }
    }
  }
}

TEST(BatchNormPlan, SumsAreTheSameBitsWhateverTheNumberOfBlocks) {
  std::mt19937 rng(30);
  for (Dims shape : {Dims{4, 192, 35, 35}, Dims{8, 2048, 8, 8}, Dims{3, 80, 9, 9}})
    for (bool last : {false, true}) {
      Tensor x = randomTensor(TensorType(DType::F32, shape), rng, -2, 3);
      Emulated e{planOf(shape, last, 4)};
      std::vector<float> mean(shape[1]), var(shape[1]);
      e.statistics(x.data<float>(), mean.data(), var.data());
      for (int blocks : {1, 64, 100000}) {
        e.blocks = blocks;
        std::vector<float> m(shape[1]), v(shape[1]);
        e.statistics(x.data<float>(), m.data(), v.data());
        EXPECT_EQ(std::memcmp(m.data(), mean.data(), m.size() * 4), 0) << blocks;
        EXPECT_EQ(std::memcmp(v.data(), var.data(), v.size() * 4), 0) << blocks;
      }
    }
}

} // namespace
} // namespace graphc
