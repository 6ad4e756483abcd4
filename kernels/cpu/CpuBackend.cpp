#include "kernels/cpu/CpuBackend.h"

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
  auto tag = layout == Layout::Blocked16 ? dnnl::memory::format_tag::nChw16c
                                         : plainTag(dims.size());
  return dnnl::memory::desc(dims, dnnlType(t.dtype), tag);
}

dnnl::memory::desc dnnlDesc(const TensorView &v) {
  return dnnlDesc(TensorType(v.dtype, v.shape), v.layout);
}

dnnl::memory dnnlMemory(const TensorView &v) {
  return dnnl::memory(dnnlDesc(v), CpuBackend::instance().engine(), v.data);
}

void setCpuThreads(int threads) { omp_set_num_threads(threads > 0 ? threads : 1); }

int cpuThreads() { return omp_get_max_threads(); }

} // namespace graphc
