//===- ChannelsLast.h - NHWC activations: the policies and axes -*- C++ -*-===//
//
// Layout::ChannelsLast stores a 4-D tensor of NCHW shape [n, c, h, w] as
// [n, h, w, c] (the channels innermost); its shape in the IR stays NCHW.
// cuDNN's tensor-core convolutions in f16 and bf16 compute in NHWC (on NCHW
// tensors they transpose around every call), so GPU values between
// convolutions, pools and elementwise ops may be kept channels-last, with a
// transpose (a layout copy, counted like the CPU's reorders) only where a
// kernel that computes in NHWC meets a plain value.
//
// Which values may be channels-last is the run's choice (graphrun train
// --gpu-layout): never (nchw), for f32, f16 and bf16 (nhwc), or, by default,
// for 16-bit floats only (auto), since TF32 convolutions were not measured
// faster in NHWC. The executor applies it per value (executor/
// LayoutAssignment.h); GPU convolutions compute in NHWC exactly where it
// allows their data type.
//
// CPU devices keep activations blocked (kernels/cpu/BlockedLayout.h), except
// where their policy (graphrun train --cpu-layout) makes them channels-last:
// by default (auto) the bf16 ones on a CPU with AMX, whose bf16 tile
// convolutions in oneDNN compute in NHWC (on the blocked layout oneDNN 2.6
// runs no AMX forward convolution, docs/performance.md); nhwc makes f32 and
// bf16 activations channels-last on any CPU, which is how the layout is
// tested where there is no AMX; blocked never.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "ir/Type.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

namespace graphc {

enum class GpuLayout : unsigned char { Nchw, Nhwc, Auto };

/// "nchw", "nhwc" or "auto"; an error lists the three.
llvm::Expected<GpuLayout> parseGpuLayout(llvm::StringRef s);
llvm::StringRef gpuLayoutName(GpuLayout l);

/// Whether values (and convolutions computing in) `t` may be channels-last
/// on a GPU under `policy`: nhwc for f32, f16 and bf16, auto for f16 and
/// bf16, nchw never.
bool channelsLastFor(GpuLayout policy, DType t);

/// The run plan's words for a policy: "auto (channels-last for f16 and bf16
/// activations, NCHW for f32)", ...
std::string describeGpuLayout(GpuLayout policy);

enum class CpuLayout : unsigned char { Blocked, Nhwc, Auto };

/// "blocked", "nhwc" or "auto"; an error lists the three.
llvm::Expected<CpuLayout> parseCpuLayout(llvm::StringRef s);
llvm::StringRef cpuLayoutName(CpuLayout l);

/// Whether CPU values (and convolutions computing in) `t` are channels-last
/// under `policy` on a CPU that has AMX (`amx`) or not: nhwc for f32 and
/// bf16, auto for bf16 with AMX, blocked never.
bool channelsLastOnCpu(CpuLayout policy, DType t, bool amx);

/// The run plan's words for a policy on this CPU: "auto (blocked; bf16
/// activations channels-last where the CPU has AMX: this one has none)", ...
std::string describeCpuLayout(CpuLayout policy, bool amx);

/// Whether `t` has the shape channels-last exists for: static, 4-D, not empty.
bool channelsLastShape(const TensorType &t);

/// [n, c, h, w] as stored channels-last: [n, h, w, c].
Dims channelsLastDims(llvm::ArrayRef<int64_t> nchw);

/// The axis of channelsLastDims() that NCHW axis `axis` (0..3) becomes.
int64_t channelsLastAxis(int64_t axis);

} // namespace graphc
