//===- CpuIsa.h - Which instruction sets our CPU code and oneDNN use -*- C++ -*-===//
//
// Our own vector code (the loops of kernels/cpu/TargetClones.h, the 1-D
// Winograd's per-ISA files) and oneDNN both pick their code from the CPU.
// One cap, read once per process, forces both onto a lower instruction set on
// any machine, so the paths of an AVX2-only CPU, or of one without AVX2, run
// and are tested on a machine with AVX-512:
//
//   GRAPHC_CPU_ISA=avx512|avx2|default  caps our code at that level and caps
//                                       oneDNN alike (avx512: every AVX-512
//                                       kernel but AMX; avx2: AVX2; default:
//                                       SSE4.1, its lowest);
//   ONEDNN_MAX_CPU_ISA=...              oneDNN's own cap, honoured by our code
//                                       too (AVX512_* -> avx512, AVX2* -> avx2,
//                                       AVX or SSE41 -> default).
//
// Where both are set, the lower wins for both. The cap is applied to oneDNN
// before its first primitive (CpuBackend asks for it), and cpuIsa() is what
// every dispatch of ours asks; describeCpuIsa() says what ran and why, for the
// run plan, --profile and `graphrun cpu`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <string>

namespace graphc {

/// The levels our own vector code is compiled for, lowest first.
enum class CpuIsa { Default, Avx2, Avx512 };

/// The level our code runs at: the highest the CPU has, within the caps.
CpuIsa cpuIsa();
/// The highest level the CPU itself has (no cap).
CpuIsa cpuIsaOfMachine();
/// "default", "avx2" or "avx512".
const char *cpuIsaName(CpuIsa isa);

/// Checks GRAPHC_CPU_ISA (the tools call it first): an unknown value is one
/// clear error; cpuIsa() ignores it.
llvm::Error checkCpuIsaSetting();

/// Applies the cap to oneDNN (once, before its first primitive); called by
/// CpuBackend and by every query of oneDNN's effective ISA.
void applyCpuIsaCap();

/// oneDNN's effective ISA by its name ("avx512_core_bf16", "avx2", ...).
std::string dnnlIsaName();

/// One line: the CPU's model, the level our code runs at and oneDNN's, and
/// the cap that lowered them, e.g. "AMD EPYC: our code avx2, oneDNN avx2
/// (GRAPHC_CPU_ISA=avx2; the CPU has avx512)".
std::string describeCpuIsa();

} // namespace graphc
