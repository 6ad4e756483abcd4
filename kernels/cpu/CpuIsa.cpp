#include "kernels/cpu/CpuIsa.h"

#include "ir/Diagnostics.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>

namespace graphc {
namespace {

const char *envOrNull(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

std::optional<CpuIsa> parseOurs(const std::string &v) {
  if (v == "avx512")
    return CpuIsa::Avx512;
  if (v == "avx2")
    return CpuIsa::Avx2;
  if (v == "default")
    return CpuIsa::Default;
  return std::nullopt;
}

/// Our level for a value of ONEDNN_MAX_CPU_ISA (none: ALL or unknown, no cap).
std::optional<CpuIsa> parseDnnl(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  if (v.rfind("AVX512", 0) == 0)
    return CpuIsa::Avx512;
  if (v.rfind("AVX2", 0) == 0)
    return CpuIsa::Avx2;
  if (v == "AVX" || v == "SSE41")
    return CpuIsa::Default;
  return std::nullopt;
}

std::optional<CpuIsa> ourCap() {
  const char *v = envOrNull("GRAPHC_CPU_ISA");
  return v ? parseOurs(v) : std::nullopt;
}

std::optional<CpuIsa> dnnlCap() {
  const char *v = envOrNull("ONEDNN_MAX_CPU_ISA");
  return v ? parseDnnl(v) : std::nullopt;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      size_t start =
          colon == std::string::npos ? line.size() : line.find_first_not_of(' ', colon + 1);
      if (start != std::string::npos && start < line.size())
        return line.substr(start);
    }
  return "this CPU";
}

} // namespace

CpuIsa cpuIsaOfMachine() {
#if defined(__x86_64__)
  static const CpuIsa machine = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
      return CpuIsa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return CpuIsa::Avx2;
    return CpuIsa::Default;
  }();
  return machine;
#else
  return CpuIsa::Default;
#endif
}

CpuIsa cpuIsa() {
  static const CpuIsa isa = [] {
    CpuIsa level = cpuIsaOfMachine();
    for (std::optional<CpuIsa> cap : {ourCap(), dnnlCap()})
      if (cap)
        level = std::min(level, *cap);
    return level;
  }();
  return isa;
}

const char *cpuIsaName(CpuIsa isa) {
  switch (isa) {
  case CpuIsa::Avx512:
    return "avx512";
  case CpuIsa::Avx2:
    return "avx2";
  case CpuIsa::Default:
    return "default";
  }
  return "default";
}

llvm::Error checkCpuIsaSetting() {
  const char *v = envOrNull("GRAPHC_CPU_ISA");
  if (v && !parseOurs(v))
    return makeError(std::string("GRAPHC_CPU_ISA=") + v +
                     ": unknown instruction set; known: avx512, avx2, default");
  return llvm::Error::success();
}

void applyCpuIsaCap() {
  static const bool applied = [] {
    std::optional<CpuIsa> ours = ourCap();
    if (!ours)
      return false;
    // ONEDNN_MAX_CPU_ISA at or below our cap stays oneDNN's.
    if (std::optional<CpuIsa> theirs = dnnlCap(); theirs && *theirs <= *ours)
      return false;
    dnnl::cpu_isa isa = *ours == CpuIsa::Avx512 ? dnnl::cpu_isa::avx512_core_bf16
                        : *ours == CpuIsa::Avx2 ? dnnl::cpu_isa::avx2
                                                : dnnl::cpu_isa::sse41;
    return dnnl::set_max_cpu_isa(isa) == dnnl::status::success;
  }();
  (void)applied;
}

std::string dnnlIsaName() {
  applyCpuIsaCap();
  using isa = dnnl::cpu_isa;
  static const std::pair<isa, const char *> names[] = {{isa::avx512_core_amx, "avx512_core_amx"},
                                                       {isa::avx512_core_bf16, "avx512_core_bf16"},
                                                       {isa::avx512_core_vnni, "avx512_core_vnni"},
                                                       {isa::avx512_core, "avx512_core"},
                                                       {isa::avx2_vnni, "avx2_vnni"},
                                                       {isa::avx2, "avx2"},
                                                       {isa::avx, "avx"},
                                                       {isa::sse41, "sse41"}};
  auto effective = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  for (auto &[value, name] : names)
    if ((static_cast<unsigned>(value) & effective) == static_cast<unsigned>(value))
      return name;
  return "none (reference code)";
}

std::string describeCpuIsa() {
  std::string line =
      cpuModel() + ": our code " + cpuIsaName(cpuIsa()) + ", oneDNN " + dnnlIsaName();
  std::string caps;
  for (const char *name : {"GRAPHC_CPU_ISA", "ONEDNN_MAX_CPU_ISA"})
    if (const char *v = envOrNull(name))
      caps += (caps.empty() ? "" : ", ") + std::string(name) + "=" + v;
  if (!caps.empty())
    line +=
        std::string(" (capped by ") + caps + "; the CPU has " + cpuIsaName(cpuIsaOfMachine()) + ")";
  return line;
}

} // namespace graphc
