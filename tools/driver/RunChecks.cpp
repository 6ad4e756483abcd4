#include "tools/driver/RunChecks.h"

#include "ir/Diagnostics.h"
#include "ir/Module.h"
#include "kernels/cpu/CpuBackend.h"
#include "passes/PsPart.h"
#include "tools/driver/Trainer.h"

#include <cmath>
#include <thread>

namespace graphc {

namespace {

llvm::Error atLeastOne(llvm::StringRef flag, const std::optional<int64_t> &v,
                       llvm::StringRef meaning) {
  if (!v || *v >= 1)
    return llvm::Error::success();
  return makeError(flag + " " + llvm::Twine(*v) + ": " + meaning + " must be at least 1");
}

} // namespace

std::string numberText(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

llvm::Error checkThreadCount(llvm::StringRef flag, std::optional<int64_t> threads, int least) {
  if (!threads)
    return llvm::Error::success();
  int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (*threads < least)
    return makeError(flag + " " + llvm::Twine(*threads) + ": the thread count must be at least " +
                     llvm::Twine(least) + (least == 1 ? " (leave it out to use every core)" : ""));
  if (*threads > kMaxThreadsPerCore * cores)
    return makeError(flag + " " + llvm::Twine(*threads) + ": more than " +
                     llvm::Twine(kMaxThreadsPerCore) + " threads per core (this machine has " +
                     llvm::Twine(cores) + " core" + (cores == 1 ? "" : "s") + ", so at most " +
                     llvm::Twine(kMaxThreadsPerCore * cores) + ")");
  return llvm::Error::success();
}

llvm::Error checkTrainOptions(const TrainOptions &opts) {
  const CompileOptions &co = opts.compile.options;
  if (co.batch <= 0)
    return makeError("--batch " + llvm::Twine(co.batch) + ": the batch must be at least 1");
  int plans = (bool)opts.steps + (bool)opts.epochs + (bool)opts.moreSteps;
  if (plans > 1)
    return makeError("--steps, --epochs and --more-steps each say how long to train: give one");
  if (auto e = atLeastOne("--steps", opts.steps, "the run's total number of steps"))
    return e;
  if (auto e = atLeastOne("--epochs", opts.epochs, "the run's total number of epochs"))
    return e;
  if (auto e = atLeastOne("--more-steps", opts.moreSteps, "the number of further steps"))
    return e;
  if (!std::isfinite(co.learningRate) || co.learningRate <= 0)
    return makeError("--lr " + numberText(co.learningRate) +
                     ": the learning rate must be a positive number");
  if (!std::isfinite(co.momentum) || co.momentum < 0 || co.momentum >= 1)
    return makeError("--momentum " + numberText(co.momentum) + ": must be in [0, 1)");
  if (!std::isfinite(co.weightDecay) || co.weightDecay < 0)
    return makeError("--weight-decay " + numberText(co.weightDecay) +
                     ": must be a non-negative number");
  if (auto e =
          atLeastOne("--checkpoint-every", opts.checkpointEvery, "the steps between checkpoints"))
    return e;
  if (auto e =
          atLeastOne("--keep-checkpoints", opts.keepCheckpoints, "the number of checkpoints kept"))
    return e;
  if (opts.checkpointDir.empty()) {
    const char *needs = opts.resume            ? "--resume"
                        : opts.checkpointEvery ? "--checkpoint-every"
                        : opts.keepCheckpoints ? "--keep-checkpoints"
                                               : nullptr;
    if (needs)
      return makeError(llvm::Twine(needs) + " needs --checkpoint DIR");
  }
  if (auto e = checkPsAccumulation(co.accumulate, opts.placement.psAsync))
    return e;
  if (opts.evalBatch < 0)
    return makeError("--eval-batch " + llvm::Twine(opts.evalBatch) + ": must be at least 1");
  return checkThreadCount("--loader-threads", opts.loaderThreads, /*least=*/0);
}

llvm::Error checkPrecisionRuns(const Module &plan,
                               const std::function<std::string(const std::string &)> &deviceMap) {
  std::string precision = plan.meta().getString("precision", "fp32");
  if (precision == "fp16") {
    // f16 layers are for GPUs; CPU devices compute them through their f32
    // kernels (slowly), which only an emulated GPU plan asks for.
    for (const auto &g : plan.graphs())
      for (const Node *n : g->nodes())
        if (n->op() == Op::Conv && n->result(0)->type().dtype == DType::F16 &&
            !llvm::StringRef(n->assignedDevice()).startswith("gpu"))
          return makeError("--precision fp16 runs on GPUs: the plan puts '" + n->name() + "' on " +
                           (n->assignedDevice().empty() ? std::string("the host")
                                                        : n->assignedDevice()) +
                           ", and CPUs here have no f16 arithmetic (use --precision bf16 on a "
                           "CPU with bf16 instructions, or --gpus N --emulate to try an fp16 "
                           "plan on CPU devices)");
    return llvm::Error::success();
  }
  if (precision != "bf16")
    return llvm::Error::success();
  for (const auto &g : plan.graphs())
    for (const Node *n : g->nodes()) {
      std::string d = deviceMap ? deviceMap(n->assignedDevice()) : n->assignedDevice();
      if (llvm::StringRef(d).startswith("gpu"))
        return makeError("--precision bf16 runs on CPU devices only: the GPU kernels are f32 (the "
                         "plan puts '" + n->name() + "' on " + d + "; train it with --emulate, or "
                         "compile it with --precision fp32)");
    }
  if (!cpuHasBf16())
    return makeError("--precision bf16: this CPU has no bf16 instructions (AVX512_BF16 or AMX) "
                     "that oneDNN may use here, so bf16 would run slower than fp32; use "
                     "--precision fp32");
  return llvm::Error::success();
}

std::string precisionNote(const Module &plan) {
  if (plan.meta().getString("precision", "fp32") != "bf16" || !cpuHasAmx())
    return "";
  return "--precision bf16 on a CPU with AMX: oneDNN 2.6's bf16 convolutions do not take the "
         "blocked layouts graphrun keeps (the forward runs without AMX, the gradients reorder "
         "around it), and on a Xeon with AMX a bf16 step took 1.7-2.2x as long as an fp32 one "
         "(docs/performance.md): --precision fp32 is likely faster here";
}

} // namespace graphc
