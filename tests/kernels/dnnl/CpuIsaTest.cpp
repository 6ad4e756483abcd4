//===- CpuIsaTest.cpp - One cap for our vector code and oneDNN ---------------===//
//
// kernels/cpu/CpuIsa.h: the level our clones and the 1-D Winograd run at is
// the CPU's, lowered by GRAPHC_CPU_ISA and ONEDNN_MAX_CPU_ISA (parsed here
// again, independently), and oneDNN is held to the same cap. scripts/test runs
// the kernel suites natively, under GRAPHC_CPU_ISA=avx2 and under =default;
// this test names the pass in its output and fails if a cap did not reach
// either side.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuIsa.h"
#include "kernels/cpu/BlockedLayout.h"
#include "kernels/cpu/Winograd1d.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace graphc;

namespace {

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

/// The level a cap asks for; the machine's own where none is set.
CpuIsa capped(CpuIsa level) {
  std::string ours = env("GRAPHC_CPU_ISA"), theirs = env("ONEDNN_MAX_CPU_ISA");
  if (ours == "avx2")
    level = std::min(level, CpuIsa::Avx2);
  if (ours == "default")
    level = std::min(level, CpuIsa::Default);
  if (theirs.rfind("AVX2", 0) == 0)
    level = std::min(level, CpuIsa::Avx2);
  if (theirs == "AVX" || theirs == "SSE41")
    level = std::min(level, CpuIsa::Default);
  return level;
}

TEST(CpuIsa, OurCodeAndOneDnnFollowTheCap) {
  std::printf("[ cpu isa  ] %s\n", describeCpuIsa().c_str());
  const CpuIsa want = capped(cpuIsaOfMachine());
  EXPECT_EQ(cpuIsa(), want) << cpuIsaName(cpuIsa()) << " instead of " << cpuIsaName(want);
  // The 1-D Winograd's vector code: AVX-512 on 16-channel blocks, AVX2 on 8.
  EXPECT_EQ(wino1d::kernelsFor(16) != nullptr, want == CpuIsa::Avx512);
  EXPECT_EQ(wino1d::kernelsFor(8) != nullptr, want >= CpuIsa::Avx2);
  // oneDNN below AVX-512 has no 16-channel blocks and no AVX-512 kernels.
  const std::string dnnl = dnnlIsaName();
  if (want < CpuIsa::Avx512) {
    EXPECT_EQ(dnnl.rfind("avx512", 0), std::string::npos) << dnnl;
    EXPECT_NE(channelBlock(), 16);
  }
  if (want < CpuIsa::Avx2) {
    EXPECT_EQ(dnnl.rfind("avx2", 0), std::string::npos) << dnnl;
  }
}

} // namespace
