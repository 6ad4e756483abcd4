//===- BlockedLayout.h - The channel-blocked layout on this CPU -*- C++ -*-===//
//
// Layout::Blocked is oneDNN's nChw<B>c: 4-D f32 (or bf16) activations whose channels are
// split into blocks of B, the block innermost. B is whatever oneDNN's
// convolutions compute in on the CPU at hand (16 on AVX-512, 8 on AVX2, and
// what ONEDNN_MAX_CPU_ISA caps it to), asked once per process with a
// representative convolution whose formats are left to oneDNN. Batch norm,
// pooling, elementwise, concat and split then take the convolutions' layout,
// so none of them is handed a block size its fast implementations lack.
// Where oneDNN chooses no channel-blocked activation layout, B is 0 and
// nothing is blocked.
//
// A value's layout besides plain is blocked unless the CPU layout policy
// makes it channels-last (kernels/ChannelsLast.h: bf16 where the CPU has
// AMX); cpuActivationLayout() says which, and every CPU kernel that keeps
// 4-D activations asks it, so producer and consumers agree.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/Kernel.h"

namespace graphc {

/// The channel block B of Layout::Blocked on this CPU (0: no blocked layout).
int channelBlock();

/// Whether a value of this type may be in Layout::Blocked: static 4-D f32 or bf16
/// with a whole number of channel blocks.
bool blockable(const TensorType &t);

/// The layout besides plain that a CPU value of type `t` may take under
/// `policy` on this CPU: channels-last where channelsLastOnCpu() says so for
/// its dtype (a static, non-empty 4-D shape; any channel count), else
/// blocked where blockable(t); none otherwise.
std::optional<Layout> cpuActivationLayout(const TensorType &t, CpuLayout policy);

/// Whether a value of type `t` can be held in layout `l` at all: plain
/// always, blocked where blockable(t), channels-last for a static, non-empty
/// 4-D f32 or bf16 shape. Kernels whose work is the same in every layout
/// (elementwise) accept what fits; the policy picks among them.
bool cpuLayoutFits(const TensorType &t, Layout l);

/// Where element (n, c, h, w) of a [N, C, H, W] tensor lives in layout `l`.
struct Index4 {
  int64_t C, H, W;
  Layout l;
  int64_t block = channelBlock();
  int64_t operator()(int64_t n, int64_t c, int64_t h, int64_t w) const {
    if (l == Layout::Plain)
      return ((n * C + c) * H + h) * W + w;
    if (l == Layout::ChannelsLast)
      return ((n * H + h) * W + w) * C + c;
    return (((n * (C / block) + c / block) * H + h) * W + w) * block + c % block;
  }
};

} // namespace graphc
