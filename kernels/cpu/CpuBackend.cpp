#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/CpuIsa.h"
#include "kernels/cpu/DnnlCompat.h"

#include <algorithm>
#include <omp.h>

namespace graphc {

CpuBackend &CpuBackend::instance() {
  static CpuBackend backend;
  return backend;
}

dnnl::stream &cpuStream(KernelContext &ctx) {
  if (ctx.stream)
    return *static_cast<dnnl::stream *>(ctx.stream);
  thread_local dnnl::stream fallback(CpuBackend::instance().engine());
  return fallback;
}

dnnl::memory::data_type dnnlType(DType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
  case DType::F32:
    return dt::f32;
  case DType::F16:
    return dt::f16;
  case DType::BF16:
    return dt::bf16;
  case DType::I32:
    return dt::s32;
  default:
    return dt::undef;
  }
}

/// The channel-blocked layouts oneDNN has for 4-D activations, by block.
static dnnl::memory::format_tag blockedTag(int block) {
  using tag = dnnl::memory::format_tag;
  switch (block) {
  case 4:
    return tag::nChw4c;
  case 8:
    return tag::nChw8c;
  case 16:
    return tag::nChw16c;
  default:
    return tag::undef;
  }
}

/// Asks oneDNN which layout its convolutions take activations in here: a 3x3
/// convolution of 64 channels on 28x28 (the middle of the networks we train)
/// with every format left to it. Its source format decides the block.
static int queryChannelBlock() {
  using dims = dnnl::memory::dims;
  using tag = dnnl::memory::format_tag;
  constexpr auto f32 = dnnl::memory::data_type::f32;
  try {
    dims x{8, 64, 28, 28}, w{64, 64, 3, 3};
    auto pd = onednn::convForwardPd(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
        dnnl::memory::desc(x, f32, tag::any), dnnl::memory::desc(w, f32, tag::any),
        dnnl::memory::desc(), dnnl::memory::desc(x, f32, tag::any), {1, 1}, {0, 0}, {1, 1}, {1, 1},
        dnnl::primitive_attr());
    for (int block : {16, 8, 4})
      if (pd.src_desc() == dnnl::memory::desc(x, f32, blockedTag(block)) &&
          pd.dst_desc() == pd.src_desc())
        return block;
  } catch (const dnnl::error &) {
    // No convolution for this CPU: nothing is blocked.
  }
  return 0;
}

int channelBlock() {
  static const int block = queryChannelBlock();
  return block;
}

bool blockable(const TensorType &t) {
  int block = channelBlock();
  return block > 0 && (t.dtype == DType::F32 || t.dtype == DType::BF16) && t.rank() == 4 &&
         t.isStatic() && t.shape[1] % block == 0;
}

std::optional<Layout> cpuActivationLayout(const TensorType &t, CpuLayout policy) {
  if (channelsLastShape(t) && channelsLastOnCpu(policy, t.dtype, cpuHasAmx()))
    return Layout::ChannelsLast;
  if (blockable(t))
    return Layout::Blocked;
  return std::nullopt;
}

bool cpuLayoutFits(const TensorType &t, Layout l) {
  switch (l) {
  case Layout::Plain:
    return true;
  case Layout::Blocked:
    return blockable(t);
  case Layout::ChannelsLast:
    break;
  }
  return channelsLastShape(t) && (t.dtype == DType::F32 || t.dtype == DType::BF16);
}

static dnnl::memory::format_tag plainTag(size_t rank) {
  using tag = dnnl::memory::format_tag;
  switch (rank) {
  case 1:
    return tag::a;
  case 2:
    return tag::ab;
  case 3:
    return tag::abc;
  case 4:
    return tag::abcd;
  case 5:
    return tag::abcde;
  default:
    return tag::abcdef;
  }
}

dnnl::memory::desc dnnlDesc(const TensorType &t, Layout layout) {
  dnnl::memory::dims dims(std::max<size_t>(t.shape.size(), 1), 1);
  for (size_t i = 0; i < t.shape.size(); ++i)
    dims[i] = t.shape[i];
  auto tag = layout == Layout::Blocked        ? blockedTag(channelBlock())
             : layout == Layout::ChannelsLast ? dnnl::memory::format_tag::acdb
                                              : plainTag(dims.size());
  return dnnl::memory::desc(dims, dnnlType(t.dtype), tag);
}

dnnl::memory::desc dnnlDesc(const TensorView &v) {
  return dnnlDesc(TensorType(v.dtype, v.shape), v.layout);
}

dnnl::memory dnnlMemory(const TensorView &v) {
  return dnnl::memory(dnnlDesc(v), CpuBackend::instance().engine(), v.data);
}

namespace {
bool effectiveIsaHas(dnnl::cpu_isa isa) {
  applyCpuIsaCap();
  auto want = static_cast<unsigned>(isa);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & want) == want;
}
} // namespace

bool cpuHasBf16() {
  return effectiveIsaHas(dnnl::cpu_isa::avx512_core_bf16);
}

bool cpuHasAmx() {
  return effectiveIsaHas(dnnl::cpu_isa::avx512_core_amx);
}

/// Asks oneDNN for a Winograd convolution (f32, 3x3, stride 1, 64 channels on
/// 28x28): oneDNN 2.6 has one on AVX-512 (within the cap), 3.x none at all.
static bool queryWinograd() {
  using tag = dnnl::memory::format_tag;
  constexpr auto f32 = dnnl::memory::data_type::f32;
  if (!effectiveIsaHas(dnnl::cpu_isa::avx512_core))
    return false;
  try {
    dnnl::memory::dims x{16, 64, 28, 28}, w{64, 64, 3, 3};
    onednn::convForwardPd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_winograd,
                          dnnl::memory::desc(x, f32, tag::any),
                          dnnl::memory::desc(w, f32, tag::any), dnnl::memory::desc(),
                          dnnl::memory::desc(x, f32, tag::any), {1, 1}, {0, 0}, {1, 1}, {1, 1},
                          dnnl::primitive_attr());
    return true;
  } catch (const dnnl::error &) {
    return false;
  }
}

bool cpuHasWinograd() {
  static const bool has = queryWinograd();
  return has;
}

void setCpuThreads(int threads) {
  omp_set_num_threads(threads > 0 ? threads : 1);
}

int cpuThreads() {
  return omp_get_max_threads();
}

} // namespace graphc
