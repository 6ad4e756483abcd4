#include "kernels/cpu/DnnlEngine.h"

#include "kernels/cpu/CpuIsa.h"

namespace graphc {

const dnnl::engine &cpuEngine() {
  static const dnnl::engine engine((applyCpuIsaCap(), dnnl::engine::kind::cpu), 0);
  return engine;
}

} // namespace graphc
