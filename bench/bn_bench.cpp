//===- bn_bench.cpp - The CUDA batch norms against memory bandwidth -------===//
//
// Times our batch-norm kernels (kernels/cuda/BatchNormDevice.h) at
// inception_v3's batch-128 shapes, f16 in NHWC (what fp16 plans run) and
// NCHW, f32 in NCHW: the training forward with the fused ReLU (statistics
// pass, merge, normalization), inference, and the ReLU-masked gradient (sums
// pass, merge, dx). Each line gives the milliseconds (median of 20 after 3
// warm-up runs) and the achieved GB/s of the bytes the passes must move
// (training: x read twice, y written; gradient: x, dy and y read twice, dx
// written), against the device's peak memory bandwidth. Where cuDNN 9 is
// found (libcudnn.so.9 through the loader), the same f16 NHWC shapes run
// through cudnnBatchNormalizationForwardTrainingEx / BackwardEx (spatial
// persistent, BN + ReLU), for the choice "ours or cuDNN's per shape".
//
// Usage: bn_bench [--quick]   (--quick: the first three shapes, 5 runs)
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/BatchNormDevice.h"

#include <cudnn.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace graphc;
using namespace graphc::cuda;

namespace {

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));             \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

struct Shape {
  int64_t n, c, h, w;
};

/// inception_v3's batch-norm shapes at batch 128 (299x299 images), largest
/// first.
const Shape kShapes[] = {{128, 64, 147, 147}, {128, 32, 147, 147}, {128, 32, 149, 149},
                         {128, 192, 71, 71},  {128, 80, 73, 73},   {128, 96, 35, 35},
                         {128, 64, 35, 35},   {128, 192, 17, 17},  {128, 128, 17, 17},
                         {128, 448, 8, 8},    {128, 384, 8, 8},    {128, 320, 8, 8}};

int runs = 20;

/// Median milliseconds of `f` on the default stream.
double timeIt(const std::function<void()> &f) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    f();
  std::vector<float> ms;
  for (int i = 0; i < runs; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    f();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// cuDNN's batch norm, opened at run time as the kernels open cuDNN.
struct Cudnn {
  void *lib = nullptr;
#define CUDNN_FN(name) decltype(&::name) name = nullptr
  CUDNN_FN(cudnnCreate);
  CUDNN_FN(cudnnCreateTensorDescriptor);
  CUDNN_FN(cudnnSetTensor4dDescriptor);
  CUDNN_FN(cudnnCreateActivationDescriptor);
  CUDNN_FN(cudnnSetActivationDescriptor);
  CUDNN_FN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize);
  CUDNN_FN(cudnnGetBatchNormalizationBackwardExWorkspaceSize);
  CUDNN_FN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize);
  CUDNN_FN(cudnnBatchNormalizationForwardTrainingEx);
  CUDNN_FN(cudnnBatchNormalizationBackwardEx);
  CUDNN_FN(cudnnGetErrorString);
#undef CUDNN_FN
  cudnnHandle_t handle = nullptr;

  bool open() {
    lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return false;
    bool ok = true;
    auto get = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      ok &= fn != nullptr;
    };
#define GET(name) get(name, #name)
    GET(cudnnCreate);
    GET(cudnnCreateTensorDescriptor);
    GET(cudnnSetTensor4dDescriptor);
    GET(cudnnCreateActivationDescriptor);
    GET(cudnnSetActivationDescriptor);
    GET(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize);
    GET(cudnnGetBatchNormalizationBackwardExWorkspaceSize);
    GET(cudnnGetBatchNormalizationTrainingExReserveSpaceSize);
    GET(cudnnBatchNormalizationForwardTrainingEx);
    GET(cudnnBatchNormalizationBackwardEx);
    GET(cudnnGetErrorString);
#undef GET
    return ok && cudnnCreate(&handle) == CUDNN_STATUS_SUCCESS;
  }
};

#define CHECK_CUDNN(call)                                                                          \
  do {                                                                                             \
    cudnnStatus_t s_ = (call);                                                                     \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                              \
      std::printf("  cudnn: %s at line %d\n", dnn.cudnnGetErrorString(s_), __LINE__);              \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

struct Buffers {
  void *x, *y, *dy, *dx, *scratch;
  float *scale, *bias, *mean, *var, *dscale, *dbias, *saveMean, *saveInv;
};

double gbps(double bytes, double ms) {
  return bytes / ms / 1e6;
}

void cudnnLine(Cudnn &dnn, const Shape &s, Buffers &b, size_t scratchBytes, double peak) {
  cudnnTensorDescriptor_t data, channels;
  cudnnActivationDescriptor_t act;
  CHECK_CUDNN(dnn.cudnnCreateTensorDescriptor(&data));
  CHECK_CUDNN(dnn.cudnnCreateTensorDescriptor(&channels));
  CHECK_CUDNN(dnn.cudnnSetTensor4dDescriptor(data, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, (int)s.n,
                                             (int)s.c, (int)s.h, (int)s.w));
  CHECK_CUDNN(dnn.cudnnSetTensor4dDescriptor(channels, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                             (int)s.c, 1, 1));
  CHECK_CUDNN(dnn.cudnnCreateActivationDescriptor(&act));
  CHECK_CUDNN(dnn.cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0));
  const auto mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const auto ops = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  size_t fwdWs = 0, bwdWs = 0, reserve = 0;
  CHECK_CUDNN(dnn.cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
      dnn.handle, mode, ops, data, nullptr, data, channels, act, &fwdWs));
  CHECK_CUDNN(dnn.cudnnGetBatchNormalizationBackwardExWorkspaceSize(
      dnn.handle, mode, ops, data, data, data, nullptr, data, channels, act, &bwdWs));
  CHECK_CUDNN(dnn.cudnnGetBatchNormalizationTrainingExReserveSpaceSize(dnn.handle, mode, ops, act,
                                                                       data, &reserve));
  if (fwdWs + bwdWs + reserve + 3 * 256 > scratchBytes) {
    std::printf("  cudnn: needs %zu bytes of workspace\n", fwdWs + bwdWs + reserve);
    return;
  }
  char *ws = static_cast<char *>(b.scratch);
  void *fwd = ws, *bwd = ws + (fwdWs + 255) / 256 * 256,
       *res = ws + (fwdWs + 255) / 256 * 256 + (bwdWs + 255) / 256 * 256;
  const float one = 1, zero = 0;
  cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
  double f = timeIt([&] {
    last = dnn.cudnnBatchNormalizationForwardTrainingEx(
        dnn.handle, mode, ops, &one, &zero, data, b.x, nullptr, nullptr, data, b.y, channels,
        b.scale, b.bias, 0.1, b.mean, b.var, 1e-3, b.saveMean, b.saveInv, act, fwd, fwdWs, res,
        reserve);
  });
  CHECK_CUDNN(last);
  double g = timeIt([&] {
    last = dnn.cudnnBatchNormalizationBackwardEx(
        dnn.handle, mode, ops, &one, &zero, &one, &zero, data, b.x, data, b.y, data, b.dy, nullptr,
        nullptr, data, b.dx, channels, b.scale, b.bias, b.dscale, b.dbias, 1e-3, b.saveMean,
        b.saveInv, act, bwd, bwdWs, res, reserve);
  });
  CHECK_CUDNN(last);
  const double bytes = (double)(s.n * s.c * s.h * s.w) * 2;
  std::printf("  cuDNN f16 NHWC          train+relu %7.3f ms %6.0f GB/s (%3.0f%%)   "
              "grad+relu %7.3f ms %6.0f GB/s (%3.0f%%)\n",
              f, gbps(2 * bytes, f), 100 * gbps(2 * bytes, f) / peak, g, gbps(4 * bytes, g),
              100 * gbps(4 * bytes, g) / peak);
}

void oursLine(ElemType t, bool last, const Shape &s, Buffers &b, size_t scratchBytes, double peak) {
  const int bytesPer = t == ElemType::F32 ? 4 : 2;
  BnPlan p = planBatchNorm(s.n, s.c, s.h * s.w, last, bytesPer);
  if ((size_t)p.partials() * sizeof(BnSums) > scratchBytes) {
    std::printf("  ours: partials too large\n");
    return;
  }
  auto *partials = static_cast<BnSums *>(b.scratch);
  cudaStream_t st = nullptr;
  double train = timeIt([&] {
    CHECK_CUDA(launchBatchNormStatistics(t, p, b.x, partials, b.mean, b.var, st));
    CHECK_CUDA(
        launchBatchNormForward(t, p, 1e-3f, true, b.x, b.scale, b.bias, b.mean, b.var, b.y, st));
  });
  double infer = timeIt([&] {
    CHECK_CUDA(
        launchBatchNormForward(t, p, 1e-3f, false, b.x, b.scale, b.bias, b.mean, b.var, b.y, st));
  });
  double grad = timeIt([&] {
    CHECK_CUDA(launchBatchNormGradientSums(t, p, 1e-3f, b.x, b.dy, b.y, b.mean, b.var, partials,
                                           b.dscale, b.dbias, st));
    CHECK_CUDA(launchBatchNormBackward(t, p, 1e-3f, b.x, b.dy, b.y, b.scale, b.mean, b.var,
                                       b.dscale, b.dbias, b.dx, st));
  });
  const double bytes = (double)p.elements() * bytesPer;
  auto pct = [&](double moved, double ms) { return 100 * gbps(moved, ms) / peak; };
  std::printf("  ours  %s %s  vec %d  train+relu %7.3f ms %6.0f GB/s (%3.0f%%)   "
              "grad+relu %7.3f ms %6.0f GB/s (%3.0f%%)   inference %7.3f ms (%3.0f%%)\n",
              t == ElemType::F32 ? "f32" : "f16", last ? "NHWC" : "NCHW", p.vec, train,
              gbps(3 * bytes, train), pct(3 * bytes, train), grad, gbps(7 * bytes, grad),
              pct(7 * bytes, grad), infer, pct(2 * bytes, infer));
}

} // namespace

int main(int argc, char **argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (quick)
    runs = 5;
  int dev = 0, clockKhz = 0, busBits = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaDeviceGetAttribute(&clockKhz, cudaDevAttrMemoryClockRate, dev));
  CHECK_CUDA(cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, dev));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  const double peak = 2.0 * clockKhz * 1e3 * (busBits / 8) / 1e9;
  std::printf("%s: peak memory bandwidth %.0f GB/s (clock %d kHz, bus %d bits)\n", prop.name, peak,
              clockKhz, busBits);
  std::printf("bytes counted: train x twice + y; grad x, dy, y twice + dx; inference x + y; "
              "cuDNN: train x + y, grad x, y, dy + dx (its statistics are one pass)\n");

  size_t most = 0;
  for (const Shape &s : kShapes)
    most = std::max(most, (size_t)(s.n * s.c * s.h * s.w) * 4);
  const size_t scratchBytes = 64 << 20;
  Buffers b{};
  for (void **p : {&b.x, &b.y, &b.dy, &b.dx})
    CHECK_CUDA(cudaMalloc(p, most));
  CHECK_CUDA(cudaMalloc(&b.scratch, scratchBytes));
  for (float **p :
       {&b.scale, &b.bias, &b.mean, &b.var, &b.dscale, &b.dbias, &b.saveMean, &b.saveInv})
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void **>(p), 4096 * sizeof(float)));
  {
    // Random data in both widths (each run reads the bytes its type asks for).
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-2, 3);
    std::vector<uint16_t> h(most / 2);
    for (uint16_t &v : h)
      v = floatToHalfBits(u(rng));
    for (void *p : {b.x, b.dy})
      CHECK_CUDA(cudaMemcpy(p, h.data(), most, cudaMemcpyHostToDevice));
    std::vector<float> ones(4096, 1.0f);
    for (float *p : {b.scale, b.bias, b.var})
      CHECK_CUDA(cudaMemcpy(p, ones.data(), 4096 * sizeof(float), cudaMemcpyHostToDevice));
  }
  Cudnn dnn;
  const bool haveCudnn = dnn.open();
  if (!haveCudnn)
    std::printf("cuDNN 9 not found: our kernels only\n");
  int count = 0;
  for (const Shape &s : kShapes) {
    if (quick && count++ == 3)
      break;
    std::printf("[%ld, %ld, %ld, %ld]\n", (long)s.n, (long)s.c, (long)s.h, (long)s.w);
    oursLine(ElemType::F16, true, s, b, scratchBytes, peak);
    oursLine(ElemType::F16, false, s, b, scratchBytes, peak);
    oursLine(ElemType::F32, false, s, b, scratchBytes, peak);
    if (haveCudnn)
      cudnnLine(dnn, s, b, scratchBytes, peak);
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  return 0;
}
