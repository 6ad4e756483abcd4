//===- CpuBackend.h - State shared by the CPU kernels ------------*- C++ -*-===//
//
// The oneDNN engine (one per process) and helpers the CPU kernels share:
// oneDNN memory descriptors for our tensor views, the per-run stream, and the
// OpenMP thread budget. KernelEnv::backend points at the CpuBackend;
// KernelContext::stream at the dnnl::stream of the device running the kernel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/DnnlEngine.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace graphc {

class CpuBackend {
public:
  static CpuBackend &instance();
  const dnnl::engine &engine() const { return cpuEngine(); }

private:
  CpuBackend() = default;
};

/// The dnnl stream a CPU kernel runs on (the context's, or a default one).
dnnl::stream &cpuStream(KernelContext &ctx);

/// oneDNN's data type for ours (f32, f16, bf16, i32; i64 and bool have none).
dnnl::memory::data_type dnnlType(DType t);
/// A descriptor of a view in its layout (plain row-major, nChw<B>c or nhwc).
dnnl::memory::desc dnnlDesc(const TensorView &v);
/// A descriptor of a plain tensor of this type.
dnnl::memory::desc dnnlDesc(const TensorType &t, Layout layout = Layout::Plain);
/// Wraps a view's buffer (no copy).
dnnl::memory dnnlMemory(const TensorView &v);

/// Whether oneDNN may use bf16 instructions here (AVX512_BF16 or AMX, within
/// the cap of kernels/cpu/CpuIsa.h). Without them its bf16 kernels emulate or fall back to
/// reference code, slower than f32.
bool cpuHasBf16();
/// Whether oneDNN may use AMX here (within the cap).
bool cpuHasAmx();
/// Whether oneDNN has Winograd convolutions here (f32; oneDNN 2.6 on AVX-512
/// within the cap, 3.x none); without them our own Winograd
/// (ConvWinograd1d.h) takes the 3x3s, or they compute directly.
bool cpuHasWinograd();

/// Sets the calling thread's OpenMP budget (oneDNN and our own loops).
void setCpuThreads(int threads);
int cpuThreads();

} // namespace graphc
