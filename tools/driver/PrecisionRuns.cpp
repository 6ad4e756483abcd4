//===- PrecisionRuns.cpp - Where a 16-bit plan may run --------------------===//

#include "tools/driver/PrecisionRuns.h"

#include "executor/DeviceRegistry.h"
#include "executor/Executor.h"
#include "ir/DeviceId.h"
#include "ir/Diagnostics.h"
#include "ir/Module.h"
#include "kernels/cpu/CpuBackend.h"

#include <optional>
#include <set>

namespace graphc {
namespace {

/// The device that runs a node, as the executor will map it.
struct RunsOn {
  DeviceId id;                 ///< cpu:0, cpu:2 (an emulated GPU), gpu:1
  std::optional<unsigned> gpu; ///< the physical GPU, for GPU devices
};

RunsOn runsOn(const Node &n, const ExecutorOptions &exec) {
  RunsOn r;
  DeviceId planned = n.assignedDevice().value_or(DeviceId::host());
  r.id = exec.deviceMap ? exec.deviceMap(planned) : planned;
  if (r.id.isGpu())
    r.gpu = exec.physicalGpu ? (unsigned)exec.physicalGpu(r.id) : r.id.index;
  return r;
}

bool touches(const Node &n, DType t) {
  for (const Value *v : n.operands())
    if (v->type().dtype == t)
      return true;
  for (unsigned i = 0; i < n.numResults(); ++i)
    if (n.result(i)->type().dtype == t)
      return true;
  return false;
}

/// Rule 1: f16 convolutions on GPUs of the plan (real or emulated).
llvm::Error checkFp16(const Module &plan) {
  for (const auto &g : plan.graphs())
    for (const Node *n : g->nodes())
      if (n->op() == Op::Conv && n->result(0)->type().dtype == DType::F16 &&
          !(n->assignedDevice() && n->assignedDevice()->isGpu()))
        return makeError(
            "--precision fp16 runs on GPUs: the plan puts '" + n->name() + "' on " +
            (n->assignedDevice() ? n->assignedDevice()->str() : std::string("the host")) +
            ", and CPUs here have no f16 arithmetic (use --precision bf16 on a "
            "CPU with bf16 instructions, or --gpus N --emulate to try an fp16 "
            "plan on CPU devices)");
  return llvm::Error::success();
}

/// Whether a bf16 convolution runs on a CPU device.
bool bf16ConvolutionOnCpu(const Module &plan, const ExecutorOptions &exec) {
  for (const auto &g : plan.graphs())
    for (const Node *n : g->nodes())
      if (isConvolution(n->op()) && n->operand(0)->type().dtype == DType::BF16 &&
          !runsOn(*n, exec).gpu)
        return true;
  return false;
}

} // namespace

PrecisionMachine PrecisionMachine::here() {
  PrecisionMachine m;
  m.cpuHasBf16 = graphc::cpuHasBf16();
  m.cpuHasAmx = graphc::cpuHasAmx();
  if (const DeviceBackend *gpus = DeviceRegistry::global().find(DeviceKind::GPU))
    m.gpuRefusal = [gpus](unsigned index, DType dtype) { return gpus->dtypeRefusal(index, dtype); };
  return m;
}

llvm::Error checkPrecisionRuns(const Module &plan, const ExecutorOptions &exec,
                               const PrecisionMachine &machine) {
  const Precision precision = plan.plan().precision.value_or(Precision::FP32);
  if (precision == Precision::FP16)
    return checkFp16(plan);
  if (precision != Precision::BF16)
    return llvm::Error::success();
  // Rule 3: each physical GPU that holds a bf16 value, asked once.
  std::set<unsigned> asked;
  for (const auto &g : plan.graphs())
    for (const Node *n : g->nodes()) {
      RunsOn where = runsOn(*n, exec);
      if (!where.gpu || !touches(*n, DType::BF16) || !machine.gpuRefusal ||
          !asked.insert(*where.gpu).second)
        continue;
      if (std::string why = machine.gpuRefusal(*where.gpu, DType::BF16); !why.empty())
        return makeError("--precision bf16: " + why + ", where the plan puts '" + n->name() +
                         "' (" + where.id.str() + "); use --precision fp16 there, or fp32");
    }
  // Rule 2.
  if (bf16ConvolutionOnCpu(plan, exec) && !machine.cpuHasBf16)
    return makeError("--precision bf16: this CPU has no bf16 instructions (AVX512_BF16 or AMX) "
                     "that oneDNN may use here, so bf16 would run slower than fp32; use "
                     "--precision fp32");
  return llvm::Error::success();
}

std::string precisionNote(const Module &plan, const ExecutorOptions &exec,
                          const PrecisionMachine &machine) {
  if (plan.plan().precision != Precision::BF16 || !machine.cpuHasAmx ||
      !bf16ConvolutionOnCpu(plan, exec))
    return "";
  if (exec.cpuLayout == CpuLayout::Blocked)
    return "--precision bf16 on a CPU with AMX under --cpu-layout blocked: oneDNN 2.6's bf16 "
           "convolutions do not take the blocked layout (the forward runs without AMX, the "
           "gradients reorder around it), and on a Xeon with AMX a bf16 step took 1.7-2.2x as "
           "long as an fp32 one (docs/performance.md): --precision fp32 is likely faster here";
  return "--precision bf16 on a CPU with AMX: bf16 activations are kept channels-last, the "
         "layout oneDNN's AMX convolutions compute in (--cpu-layout auto); no run has measured "
         "this yet (on the blocked layout a bf16 step took 1.7-2.2x as long as an fp32 one, "
         "docs/performance.md): compare with --precision fp32";
}

} // namespace graphc
