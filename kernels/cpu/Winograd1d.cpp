//===- Winograd1d.cpp - 1-D Winograd convolutions: tables, plans, passes ---===//

#include "kernels/cpu/Winograd1d.h"

#include "kernels/cpu/TargetClones.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>

namespace graphc {
namespace wino1d {
namespace {

/// The finite points, in the order the smaller transforms take them.
constexpr double kPoints[] = {0, 1, -1, 2, -2, 0.5, -0.5, 0.75, -0.75};

/// Tiles per job: enough for each transformed weight loaded into registers
/// to serve many tiles, few enough for a job's tiles to stay in cache.
constexpr int64_t kTilesPerJob = 48;

/// The wide schedule (one job of every tile, so the transformed weights
/// stream once per run instead of once per job) for few tiles and large
/// weights: at batch 16, inception_v3's 384-channel 1x3 on 8x8 (3.5 MB, 256
/// tiles) 1.1-1.25x faster than in jobs, resnet18's 512-channel 3x3 on 7x7
/// (18 MB, 224 tiles) 1.3-1.8x; its 256-channel 3x3 on 14x14 (4.5 MB, 896
/// tiles) 0.85-1.0x.
constexpr double kWideWeightBytes = 1 << 20;
constexpr int64_t kWideTiles = 512;

/// Rows of weights (a channel's window lines times taps) the weight transforms
/// stage at once.
constexpr int64_t kStageRows = 112;
/// Floats past each staged row of the forward weights: rows a power of two
/// apart would all fall in two sets of the level-1 cache (2 KB apart at 512
/// channels), and the transposition into them ran 4x slower.
constexpr int64_t kStagePad = 16;

/// Ascending coefficients of prod (x - p) over `points` except `skip`.
std::vector<double> polynomial(const double *points, int n, int skip) {
  std::vector<double> c{1.0};
  for (int l = 0; l < n; ++l) {
    if (l == skip)
      continue;
    std::vector<double> next(c.size() + 1, 0.0);
    for (size_t i = 0; i < c.size(); ++i) {
      next[i + 1] += c[i];
      next[i] -= points[l] * c[i];
    }
    c = std::move(next);
  }
  return c;
}

/// Toom-Cook F(m, r) at kPoints and infinity.
Tables makeTables(int m, int r) {
  Tables t{};
  t.m = m;
  t.r = r;
  t.alpha = m + r - 1;
  const int a = t.alpha, n = a - 1;
  for (int k = 0; k < n; ++k) {
    double p = kPoints[k], f = 1;
    for (int l = 0; l < n; ++l)
      if (l != k)
        f *= p - kPoints[l];
    double power = 1;
    for (int i = 0; i < std::max(m, r); ++i, power *= p) {
      if (i < m)
        t.AT[i * a + k] = (float)power;
      if (i < r)
        t.G[k * r + i] = (float)(power / f);
    }
    std::vector<double> c = polynomial(kPoints, n, k);
    for (size_t l = 0; l < c.size(); ++l)
      t.BT[k * a + l] = (float)c[l];
  }
  t.AT[(m - 1) * a + n] = 1;
  t.G[n * r + r - 1] = 1;
  std::vector<double> c = polynomial(kPoints, n, -1);
  for (size_t l = 0; l < c.size(); ++l)
    t.BT[n * a + l] = (float)c[l];
  return t;
}

/// u[o] = sum_j g[j] rows[j * ld + o], j < r, o < n.
GRAPHC_ISA_CLONES(void, combineRows,
                  (float *u, const float *rows, int64_t ld, const float *g, int r, int64_t n),
                  (u, rows, ld, g, r, n)) {
  for (int64_t o = 0; o < n; ++o)
    u[o] = 0;
  for (int j = 0; j < r; ++j) {
    const float gj = g[j], *row = rows + j * ld;
    if (gj != 0)
      for (int64_t o = 0; o < n; ++o)
        u[o] += gj * row[o];
  }
}

GRAPHC_ISA_CLONES(void, addRow, (float *acc, const float *x, int64_t n), (acc, x, n)) {
  for (int64_t i = 0; i < n; ++i)
    acc[i] += x[i];
}

/// Calls f(thread, begin, end) on disjoint ranges covering [0, n), on at most
/// `threads` threads (each thread's buffers are the plan's, so never more),
/// numbered from 0.
template <typename F> void parallel(int64_t n, int threads, F &&f) {
  int64_t count = std::min<int64_t>({(int64_t)threads, (int64_t)omp_get_max_threads(), n});
  if (count <= 1 || omp_in_parallel()) {
    f(int64_t(0), int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads((int)count)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end)
      f(t, begin, end);
  }
}

/// Floats rounded up to a whole number of 64-byte lines.
int64_t lines64(int64_t floats) {
  return (floats + 15) / 16 * 16;
}

} // namespace

const Tables *tablesFor(int r) {
  static const Tables f3 = makeTables(4, 3), f5 = makeTables(4, 5), f7 = makeTables(4, 7);
  switch (r) {
  case 3:
    return &f3;
  case 5:
    return &f5;
  case 7:
    return &f7;
  default:
    return nullptr;
  }
}

const IsaKernels *kernelsFor(int block) {
#if defined(__x86_64__)
  if (block == 16 && cpuIsa() >= CpuIsa::Avx512)
    return &avx512Kernels();
  if (block == 8 && cpuIsa() >= CpuIsa::Avx2)
    return &avx2Kernels();
#else
  (void)block;
#endif
  return nullptr;
}

std::optional<Shape> shapeOf(const int64_t x[4], const int64_t w[4], const int64_t strides[2],
                             const int64_t dilations[2], const int64_t pads[4], int64_t group,
                             int block) {
  if (group != 1 || strides[0] != 1 || strides[1] != 1 || dilations[0] != 1 || dilations[1] != 1 ||
      w[1] != x[1] || block <= 0 || !kernelsFor(block))
    return std::nullopt;
  Shape s;
  // Along the width where the window is 3, 5 or 7 wide (and any height up to
  // 7 folds), else along the height of a K x 1 window.
  s.alongW = tablesFor((int)w[3]) != nullptr;
  if (!s.alongW && (w[3] != 1 || !tablesFor((int)w[2])))
    return std::nullopt;
  s.taps = (int)(s.alongW ? w[3] : w[2]);
  s.fold = (int)(s.alongW ? w[2] : 1);
  if (s.fold < 1 || s.fold > 7)
    return std::nullopt;
  const int axis = s.alongW ? 1 : 0, across = 1 - axis;
  // Padding below the window (each output sees an input, and the data
  // gradient's mirrored padding is not negative).
  for (int side : {0, 2})
    if (pads[axis + side] < 0 || pads[axis + side] >= s.taps || pads[across + side] < 0 ||
        pads[across + side] >= s.fold)
      return std::nullopt;
  s.batch = x[0];
  s.cin = x[1];
  s.cout = w[0];
  s.height = x[2];
  s.width = x[3];
  s.outHeight = x[2] + pads[0] + pads[2] - w[2] + 1;
  s.outWidth = x[3] + pads[1] + pads[3] - w[3] + 1;
  s.pad = pads[axis];
  s.padAcross = pads[across];
  s.block = block;
  if (s.cin % block || s.cout % block || s.batch < 1 || s.height < 1 || s.width < 1 ||
      s.outHeight < 1 || s.outWidth < 1)
    return std::nullopt;
  return s;
}

Plan::Plan(const Shape &s, int threads)
    : shape_(s), tables_(tablesFor(s.taps)), isa_(kernelsFor(s.block)),
      threads_(std::max(threads, 1)) {
  const int64_t forwardTiles =
      s.batch * (s.alongW ? s.outHeight : s.outWidth) *
      (((s.alongW ? s.outWidth : s.outHeight) + tables_->m - 1) / tables_->m);
  wide_ = 4.0 * tables_->alpha * s.fold * s.cin * s.cout > kWideWeightBytes &&
          forwardTiles <= kWideTiles;
  // Panels as wide as a register block, or the widest number of vectors
  // below that dividing both passes' columns (cout forward, cin for the data
  // gradient).
  if (wide_)
    for (panel_ = isa_->panel; s.cout % panel_ || s.cin % panel_;)
      panel_ -= s.block;
  for (Pass p : {Pass::Forward, Pass::Data}) {
    Correlation c = correlation(p);
    maxTiles_ = std::max(maxTiles_, c.linesPerJob * c.perLine);
  }
}

Walk Plan::walk(int64_t channels, int64_t h, int64_t w) const {
  const int64_t B = shape_.block;
  Walk k;
  k.image = channels * h * w;
  k.block = h * w * B;
  k.line = shape_.alongW ? w * B : B;
  k.pos = shape_.alongW ? B : w * B;
  k.lines = shape_.alongW ? h : w;
  k.length = shape_.alongW ? w : h;
  return k;
}

Plan::Correlation Plan::correlation(Pass p) const {
  const Shape &s = shape_;
  Correlation c;
  if (p == Pass::Data) {
    // dx = dy * (the window flipped, channels swapped), the padding mirrored.
    c.cin = s.cout;
    c.cout = s.cin;
    c.in = walk(s.cout, s.outHeight, s.outWidth);
    c.out = walk(s.cin, s.height, s.width);
    c.pad = s.taps - 1 - s.pad;
    c.padAcross = s.fold - 1 - s.padAcross;
  } else {
    c.cin = s.cin;
    c.cout = s.cout;
    c.in = walk(s.cin, s.height, s.width);
    c.out = walk(s.cout, s.outHeight, s.outWidth);
    c.pad = s.pad;
    c.padAcross = s.padAcross;
  }
  const int64_t lines = s.batch * c.out.lines;
  c.perLine = (c.out.length + tables_->m - 1) / tables_->m;
  c.linesPerJob = wide_ ? lines : std::clamp<int64_t>(kTilesPerJob / c.perLine, 1, lines);
  c.jobs = (lines + c.linesPerJob - 1) / c.linesPerJob;
  return c;
}

Job Plan::job(int64_t index, const Correlation &c) const {
  Job j;
  j.tables = tables_;
  j.line0 = index * c.linesPerJob;
  j.line1 = std::min(shape_.batch * c.out.lines, j.line0 + c.linesPerJob);
  j.lines = c.out.lines;
  j.perLine = c.perLine;
  j.tiles = (j.line1 - j.line0) * c.perLine;
  j.pad = c.pad;
  j.padAcross = c.padAcross;
  j.fold = shape_.fold;
  return j;
}

// Scratch, in floats: [U: alpha x fold x cin x cout, forward and data only],
// then the shared part, then per thread: two tile buffers of alpha x (a
// job's tiles) x fold x max(cin, cout) (shared in the wide schedule), a
// staging area of (kStageRows + alpha) rows of max(cin, cout) + kStagePad and, for the
// filter gradient, an accumulator of alpha x fold x cin x cout (one, shared,
// in the wide schedule).
namespace {
struct Sizes {
  int64_t weights, tiles, stage, accumulator, shared, perThread;
};
Sizes sizesOf(const Shape &s, const Tables &t, int64_t maxTiles, Pass p, bool wide) {
  const int64_t channels = std::max(s.cin, s.cout), product = t.alpha * s.fold * s.cin * s.cout;
  Sizes z;
  z.weights = p == Pass::Filter ? 0 : lines64(product);
  z.tiles = lines64(t.alpha * maxTiles * s.fold * channels);
  z.stage = lines64((kStageRows + t.alpha) * (channels + kStagePad));
  z.accumulator = p == Pass::Filter ? lines64(product) : 0;
  z.shared = wide ? 2 * z.tiles + z.accumulator : 0;
  z.perThread = wide ? z.stage : 2 * z.tiles + z.stage + z.accumulator;
  return z;
}

/// Where a thread's pieces of the scratch after the weights are.
struct Areas {
  const Sizes &z;
  float *base;
  bool wide;
  float *own(int64_t t) const { return base + z.shared + t * z.perThread; }
  float *tiles(int64_t t) const { return wide ? base : own(t); }
  float *stage(int64_t t) const { return own(t) + (wide ? 0 : 2 * z.tiles); }
  float *accumulator(int64_t t) const {
    return wide ? base + 2 * z.tiles : own(t) + 2 * z.tiles + z.stage;
  }
};
} // namespace

size_t Plan::scratchBytes(Pass p) const {
  Sizes z = sizesOf(shape_, *tables_, maxTiles_, p, wide_);
  return (size_t)(z.weights + z.shared + threads_ * z.perThread) * sizeof(float);
}

void Plan::correlate(const Correlation &c, const float *in, float *out, const float *U,
                     const float *bias, float *buffers, int post) const {
  if (wide_)
    return correlateWide(c, in, out, U, bias, buffers, post);
  const Sizes z = sizesOf(shape_, *tables_, maxTiles_, Pass::Forward, wide_);
  const Areas areas{z, buffers, wide_};
  const int a = tables_->alpha;
  const int64_t depth = shape_.fold * c.cin;
  parallel(c.jobs, threads_, [&](int64_t thread, int64_t begin, int64_t end) {
    float *V = areas.tiles(thread), *M = V + z.tiles;
    for (int64_t i = begin; i < end; ++i) {
      Job j = job(i, c);
      isa_->inputTransform(j, in, c.in, c.cin, V);
      for (int k = 0; k < a; ++k)
        isa_->gemm(j.tiles, depth, c.cout, V + k * j.tiles * depth, depth, U + k * depth * c.cout,
                   c.cout, M + k * j.tiles * c.cout, c.cout);
      isa_->outputTransform(j, M, c.cout, bias, out, c.out, post);
    }
  });
}

/// `all` (the job of every tile) restricted to output lines [begin, end).
static Job linesOf(const Job &all, int64_t begin, int64_t end) {
  Job j = all;
  j.line0 = begin;
  j.line1 = end;
  j.first = begin * all.perLine;
  return j;
}

void Plan::correlateWide(const Correlation &c, const float *in, float *out, const float *U,
                         const float *bias, float *buffers, int post) const {
  const Sizes z = sizesOf(shape_, *tables_, maxTiles_, Pass::Forward, wide_);
  const int a = tables_->alpha;
  const int64_t depth = shape_.fold * c.cin;
  const Job all = job(0, c);
  float *V = buffers, *M = V + z.tiles;
  parallel(all.line1, threads_, [&](int64_t, int64_t begin, int64_t end) {
    isa_->inputTransform(linesOf(all, begin, end), in, c.in, c.cin, V);
  });
  const int64_t P = panel_;
  parallel(c.cout / P, threads_, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t q = begin; q < end; ++q)
      for (int k = 0; k < a; ++k)
        isa_->gemm(all.tiles, depth, P, V + k * all.tiles * depth, depth,
                   U + (k * c.cout + q * P) * depth, P, M + k * all.tiles * c.cout + q * P, c.cout);
  });
  parallel(all.line1, threads_, [&](int64_t, int64_t begin, int64_t end) {
    isa_->outputTransform(linesOf(all, begin, end), M, c.cout, bias, out, c.out, post);
  });
}

int64_t Plan::weightFloats() const {
  return tables_->alpha * shape_.fold * shape_.cin * shape_.cout;
}

void Plan::transformWeights(const float *w, float *U, void *scratch) const {
  const Sizes z = sizesOf(shape_, *tables_, maxTiles_, Pass::Forward, wide_);
  transformWeightsWith(w, U, static_cast<float *>(scratch) + z.weights);
}

void Plan::storeRow(float *U, int k, int64_t d, int64_t depth, int64_t cols,
                    const float *row) const {
  const int64_t P = panel_ ? panel_ : cols;
  float *point = U + k * depth * cols;
  for (int64_t q = 0; q < cols / P; ++q)
    std::copy(row + q * P, row + (q + 1) * P, point + (q * depth + d) * P);
}

void Plan::transformWeightsWith(const float *w, float *U, float *buffers) const {
  const Sizes z = sizesOf(shape_, *tables_, maxTiles_, Pass::Forward, wide_);
  const int64_t cin = shape_.cin, cout = shape_.cout, r = shape_.taps, fold = shape_.fold;
  const int64_t rowsPerChannel = fold * r,
                perStage = std::max<int64_t>(1, kStageRows / rowsPerChannel), ld = cout + kStagePad;
  const Areas areas{z, buffers, wide_};
  // U[k][a][c][o] = sum_j G[k][j] w[o][c][a][j], for a few input channels at
  // a time: their taps of every output channel, read in runs, staged as rows
  // [c][a][j][o], then combined row by row.
  parallel(cin, threads_, [&](int64_t thread, int64_t begin, int64_t end) {
    float *stage = areas.stage(thread);
    std::vector<float> row(panel_ ? cout : 0);
    for (int64_t c0 = begin; c0 < end; c0 += perStage) {
      const int64_t n = std::min(perStage, end - c0);
      for (int64_t o = 0; o < cout; ++o) {
        const float *from = w + (o * cin + c0) * rowsPerChannel;
        for (int64_t i = 0; i < n * rowsPerChannel; ++i)
          stage[i * ld + o] = from[i];
      }
      for (int64_t c = 0; c < n; ++c)
        for (int64_t f = 0; f < fold; ++f)
          for (int k = 0; k < tables_->alpha; ++k) {
            const int64_t d = f * cin + c0 + c;
            float *to = panel_ ? row.data() : U + (k * fold * cin + d) * cout;
            combineRows(to, stage + (c * fold + f) * r * ld, ld, tables_->G + k * r, (int)r, cout);
            if (panel_)
              storeRow(U, k, d, fold * cin, cout, to);
          }
    }
  });
}

void Plan::forward(const float *x, const float *w, const float *bias, float *y, void *scratch,
                   int post, const float *U) const {
  const Sizes z = sizesOf(shape_, *tables_, maxTiles_, Pass::Forward, wide_);
  float *own = static_cast<float *>(scratch), *buffers = own + z.weights;
  if (!U) {
    transformWeightsWith(w, own, buffers);
    U = own;
  }
  correlate(correlation(Pass::Forward), x, y, U, bias, buffers, post);
}

void Plan::backwardData(const float *dy, const float *w, float *dx, void *scratch) const {
  const Sizes z = sizesOf(shape_, *tables_, maxTiles_, Pass::Data, wide_);
  const int64_t cin = shape_.cin, cout = shape_.cout, r = shape_.taps, fold = shape_.fold;
  float *U = static_cast<float *>(scratch), *buffers = U + z.weights;
  const Areas areas{z, buffers, wide_};
  // The window flipped, channels swapped:
  // U[k][a][o][c] = sum_j G[k][j] w[o][c][fold-1-a][r-1-j].
  parallel(cout, threads_, [&](int64_t thread, int64_t begin, int64_t end) {
    float *stage = areas.stage(thread);
    std::vector<float> row(panel_ ? cin : 0);
    for (int64_t o = begin; o < end; ++o) {
      for (int64_t c = 0; c < cin; ++c)
        for (int64_t f = 0; f < fold; ++f)
          for (int64_t j = 0; j < r; ++j)
            stage[(f * r + j) * cin + c] =
                w[((o * cin + c) * fold + (fold - 1 - f)) * r + (r - 1 - j)];
      for (int64_t f = 0; f < fold; ++f)
        for (int k = 0; k < tables_->alpha; ++k) {
          const int64_t d = f * cout + o;
          float *to = panel_ ? row.data() : U + (k * fold * cout + d) * cin;
          combineRows(to, stage + f * r * cin, cin, tables_->G + k * r, (int)r, cin);
          if (panel_)
            storeRow(U, k, d, fold * cout, cin, to);
        }
    }
  });
  correlate(correlation(Pass::Data), dy, dx, U, nullptr, buffers, 0);
}

void Plan::backwardFilter(const float *x, const float *dy, float *dw, void *scratch) const {
  const Sizes z = sizesOf(shape_, *tables_, maxTiles_, Pass::Filter, wide_);
  const Areas areas{z, static_cast<float *>(scratch), wide_};
  const int64_t cin = shape_.cin, cout = shape_.cout, r = shape_.taps, fold = shape_.fold;
  const int64_t depth = fold * cin, B = shape_.block;
  const int a = tables_->alpha, accumulators = wide_ ? 1 : threads_;
  const Correlation c = correlation(Pass::Forward);
  if (wide_) {
    // Every tile transformed (split by lines), then each thread its rows of
    // the one dU: dU[k] = (BT x)[k]^T (A dy)[k].
    const Job all = job(0, c);
    float *V = areas.tiles(0), *E = V + z.tiles, *dU = areas.accumulator(0);
    parallel(all.line1, threads_, [&](int64_t, int64_t begin, int64_t end) {
      Job j = linesOf(all, begin, end);
      isa_->inputTransform(j, x, c.in, cin, V);
      isa_->gradientTransform(j, dy, c.out, cout, E);
    });
    parallel(depth / B, threads_, [&](int64_t, int64_t begin, int64_t end) {
      for (int k = 0; k < a; ++k) {
        float *rows = dU + (k * depth + begin * B) * cout;
        std::memset(rows, 0, (end - begin) * B * cout * sizeof(float));
        isa_->gemmTransposedAccumulate((end - begin) * B, all.tiles, cout,
                                       V + k * all.tiles * depth + begin * B, depth,
                                       E + k * all.tiles * cout, cout, rows, cout);
      }
    });
  } else {
    parallel(threads_, threads_, [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        std::memset(areas.accumulator(t), 0, a * depth * cout * sizeof(float));
    });
    // Each thread's tiles: dU[k] += (BT x)[k]^T (A dy)[k].
    parallel(c.jobs, threads_, [&](int64_t thread, int64_t begin, int64_t end) {
      float *V = areas.tiles(thread), *E = V + z.tiles, *dU = areas.accumulator(thread);
      for (int64_t i = begin; i < end; ++i) {
        Job j = job(i, c);
        isa_->inputTransform(j, x, c.in, cin, V);
        isa_->gradientTransform(j, dy, c.out, cout, E);
        for (int k = 0; k < a; ++k)
          isa_->gemmTransposedAccumulate(depth, j.tiles, cout, V + k * j.tiles * depth, depth,
                                         E + k * j.tiles * cout, cout, dU + k * depth * cout, cout);
      }
    });
  }
  // dw[o][c][f][j] = sum_k G[k][j] (sum over threads of dU[k][f][c][o]), in thread order,
  // for a few input channels at a time: staged as rows [c][f][j][o], then
  // written out in runs of each output channel's taps (the forward's staging
  // backwards).
  const int64_t rowsPerChannel = fold * r, ld = cout + kStagePad,
                perStage = std::max<int64_t>(1, kStageRows / rowsPerChannel);
  parallel(cin, threads_, [&](int64_t thread, int64_t begin, int64_t end) {
    float *sum = areas.stage(thread), *taps = sum + a * cout;
    float column[kMaxAlpha];
    for (int64_t c0 = begin; c0 < end; c0 += perStage) {
      const int64_t n = std::min(perStage, end - c0);
      for (int64_t c = 0; c < n; ++c)
        for (int64_t f = 0; f < fold; ++f) {
          const int64_t row = f * cin + c0 + c;
          for (int k = 0; k < a; ++k) {
            float *s = sum + k * cout;
            std::memcpy(s, areas.accumulator(0) + (k * depth + row) * cout, cout * sizeof(float));
            for (int t = 1; t < accumulators; ++t)
              addRow(s, areas.accumulator(t) + (k * depth + row) * cout, cout);
          }
          for (int64_t j = 0; j < r; ++j) {
            for (int k = 0; k < a; ++k)
              column[k] = tables_->G[k * r + j];
            combineRows(taps + ((c * fold + f) * r + j) * ld, sum, cout, column, a, cout);
          }
        }
      for (int64_t o = 0; o < cout; ++o) {
        float *to = dw + (o * cin + c0) * rowsPerChannel;
        for (int64_t i = 0; i < n * rowsPerChannel; ++i)
          to[i] = taps[i * ld + o];
      }
    }
  });
}

} // namespace wino1d
} // namespace graphc
