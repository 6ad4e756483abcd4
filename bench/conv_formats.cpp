//===- conv_formats.cpp - oneDNN's convolutions by activation format and type -===//
//
// Times oneDNN's own convolution primitives (forward, backward data, backward
// weights) on conv_bench's shapes, with f32 or bf16 activations in three
// formats: the channel-blocked one graphrun keeps (nChw<B>c), channels-last
// (nhwc, which graphrun does not have), and whatever oneDNN picks ("any").
// Prints GFLOP/s and the implementation oneDNN chose for each pass.
//
// What it is for: on a CPU with AMX, whether bf16 convolutions in
// channels-last would pay (oneDNN 2.6 ran no AMX forward convolution on the
// blocked layout there), before anyone builds that layout into the executor.
// Weights are in the format each primitive prefers and are not timed (graphrun
// keeps reordered weights); bf16 passes read bf16 weights and write f32 filter
// gradients, as --precision bf16 does.
//
//   conv_formats [--batch N] [--threads T] [--min-seconds S] [--only SUBSTRING]
//                [--dtype f32|bf16|both]
//
//===----------------------------------------------------------------------===//

#include "bench/ConvBenchCommon.h"
#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/DnnlCompat.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

using namespace graphc;
using namespace graphc::bench;

namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Options : CommonOptions {
  static constexpr const char *usage = "conv_formats [--batch N] [--threads T] [--min-seconds S] "
                                       "[--only SUBSTRING] [--dtype f32|bf16|both]";
  bool f32 = true, bf16 = true;

  /// This program's own option, --dtype.
  bool take(const char *flag, const char *value) {
    const bool onlyF32 = !std::strcmp(value, "f32"), onlyBf16 = !std::strcmp(value, "bf16");
    if (std::strcmp(flag, "--dtype") || !(onlyF32 || onlyBf16 || !std::strcmp(value, "both")))
      return false;
    f32 = !onlyBf16;
    bf16 = !onlyF32;
    return true;
  }
};

struct Format {
  const char *name;
  tag t;
};

/// One pass: best seconds per run and oneDNN's implementation.
struct Timed {
  double seconds = -1;
  std::string impl;
};

/// A buffer for `md`, every byte 0x3c (0.0115 in f32 and in bf16: no
/// denormals, no NaNs).
dnnl::memory filled(const dnnl::memory::desc &md) {
  dnnl::memory m(md, CpuBackend::instance().engine());
  std::memset(m.get_data_handle(), 0x3c, md.get_size());
  return m;
}

Timed timeRuns(const dnnl::primitive &p, const std::unordered_map<int, dnnl::memory> &args,
               std::string impl, const Options &opt) {
  dnnl::stream s(CpuBackend::instance().engine());
  auto wall = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  auto run = [&] {
    p.execute(s, args);
    s.wait();
    return true;
  };
  return {bestSeconds(run, wall, opt.minSeconds), std::move(impl)};
}

/// The three passes of shape `s` with activations of type `type` in format
/// `f`; a pass oneDNN cannot create is left at seconds < 0 with its reason.
std::array<Timed, 3> timeShape(const Shape &s, dt type, const Format &f, const Options &opt) {
  using namespace dnnl;
  const int64_t n = s.batch ? s.batch : opt.batch;
  const int64_t oh = (s.hw + 2 * s.padH - s.kh) / s.stride + 1;
  const int64_t ow = (s.hw + 2 * s.padW - s.kw) / s.stride + 1;
  const dims x{n, s.c, s.hw, s.hw}, w{s.o, s.c, s.kh, s.kw}, y{n, s.o, oh, ow};
  const dims strides{s.stride, s.stride}, dilates{0, 0}, pads{s.padH, s.padW};
  auto act = [&](const dims &d) { return memory::desc(d, type, f.t); };
  const memory::desc wAny(w, type, tag::any), dwAny(w, dt::f32, tag::any);
  std::array<Timed, 3> out;
  try {
    auto fwd = onednn::convForwardPd(prop_kind::forward_training, algorithm::convolution_direct,
                                     act(x), wAny, memory::desc(), act(y), strides, dilates, pads,
                                     pads, primitive_attr());
    out[0] = timeRuns(convolution_forward(fwd),
                      {{DNNL_ARG_SRC, filled(fwd.src_desc())},
                       {DNNL_ARG_WEIGHTS, filled(fwd.weights_desc())},
                       {DNNL_ARG_DST, filled(fwd.dst_desc())}},
                      fwd.impl_info_str(), opt);
    auto data = onednn::convBackwardPd<convolution_backward_data>(
        algorithm::convolution_direct, act(x), wAny, act(y), strides, dilates, pads, pads, fwd,
        primitive_attr());
    out[1] = timeRuns(convolution_backward_data(data),
                      {{DNNL_ARG_DIFF_DST, filled(data.diff_dst_desc())},
                       {DNNL_ARG_WEIGHTS, filled(data.weights_desc())},
                       {DNNL_ARG_DIFF_SRC, filled(data.diff_src_desc())}},
                      data.impl_info_str(), opt);
    auto filter =
        onednn::convBackwardPd<convolution_backward_weights>(algorithm::convolution_direct, act(x),
                                                             dwAny, act(y), strides, dilates, pads,
                                                             pads, fwd, primitive_attr());
    out[2] = timeRuns(convolution_backward_weights(filter),
                      {{DNNL_ARG_SRC, filled(filter.src_desc())},
                       {DNNL_ARG_DIFF_DST, filled(filter.diff_dst_desc())},
                       {DNNL_ARG_DIFF_WEIGHTS, filled(filter.diff_weights_desc())}},
                      filter.impl_info_str(), opt);
  } catch (const dnnl::error &e) {
    for (Timed &t : out)
      if (t.seconds < 0 && t.impl.empty())
        t.impl = std::string("none: ") + e.what();
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  Options opt;
  if (!parseOptions(argc, argv, opt))
    return 2;
  if (opt.bf16 && !cpuHasBf16()) {
    std::printf("bf16: no bf16 instructions here (or capped by ONEDNN_MAX_CPU_ISA); not timed\n");
    opt.bf16 = false;
  }
  const int block = channelBlock();
  const Format formats[] = {
      {block == 16  ? "nChw16c"
       : block == 8 ? "nChw8c"
                    : "nchw",
       block == 16  ? tag::nChw16c
       : block == 8 ? tag::nChw8c
                    : tag::nchw},
      {"nhwc", tag::nhwc},
      {"any", tag::any},
  };
  std::printf("batch %lld, %d threads, AMX %s; GFLOP/s (best run) and oneDNN's implementation\n",
              (long long)opt.batch, cpuThreads(), cpuHasAmx() ? "available" : "not available");
  std::printf("%-24s %-4s %-8s  %-35s  %-35s  %-35s\n", "layer", "type", "format", "forward",
              "backward-data", "backward-weights");
  bool ok = true;
  for (const Shape &s : kShapes) {
    if (!std::strstr(s.name, opt.only))
      continue;
    const int64_t n = s.batch ? s.batch : opt.batch;
    const int64_t oh = (s.hw + 2 * s.padH - s.kh) / s.stride + 1;
    const int64_t ow = (s.hw + 2 * s.padW - s.kw) / s.stride + 1;
    const double flops = 2.0 * n * s.o * oh * ow * s.c * s.kh * s.kw;
    for (dt type : {dt::f32, dt::bf16}) {
      if (type == dt::f32 ? !opt.f32 : !opt.bf16)
        continue;
      for (const Format &f : formats) {
        std::printf("%-24s %-4s %-8s", s.name, type == dt::f32 ? "f32" : "bf16", f.name);
        // graphrun blocks only whole blocks of channels (the stem's 3 stay plain).
        if (&f == &formats[0] && block && (s.c % block || s.o % block)) {
          std::printf("  not blocked: channels not a whole number of blocks\n");
          continue;
        }
        std::array<Timed, 3> t = timeShape(s, type, f, opt);
        for (const Timed &p : t) {
          ok &= p.seconds > 0;
          if (p.seconds > 0)
            std::printf("  %6.0f %-28s", flops / p.seconds * 1e-9, p.impl.c_str());
          else
            std::printf("  %6s %-28s", "-", p.impl.c_str());
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  return ok ? 0 : 1;
}
