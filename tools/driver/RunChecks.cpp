#include "tools/driver/RunChecks.h"

#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"
#include "ir/Module.h"
#include "passes/PsPart.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/TrainOptions.h"

#include <cmath>
#include <thread>

namespace graphc {

namespace {

llvm::Error atLeastOne(llvm::StringRef flag, const std::optional<int64_t> &v,
                       llvm::StringRef meaning) {
  return checkAtLeast(flag, v, 1, meaning);
}

} // namespace

llvm::Error checkAtLeast(llvm::StringRef flag, std::optional<int64_t> value, int64_t least,
                         llvm::StringRef meaning) {
  if (!value || *value >= least)
    return llvm::Error::success();
  return makeError(flag + " " + llvm::Twine(*value) + ": " + meaning + " must be at least " +
                   llvm::Twine(least));
}

llvm::Error applyModelFlags(const ModelFlags &flags, ModelSpec &spec) {
  if (auto e = atLeastOne("--num-classes", flags.numClasses, "the number of classes"))
    return e;
  if (auto e = atLeastOne("--image-size", flags.imageSize, "the image side"))
    return e;
  if (flags.dropout && !(*flags.dropout >= 0 && *flags.dropout < 1))
    return makeError("--dropout " + numberText(*flags.dropout) +
                     ": the dropout ratio must be in [0, 1)");
  const char *given = flags.numClasses  ? "--num-classes"
                      : flags.imageSize ? "--image-size"
                      : flags.dropout   ? "--dropout"
                      : flags.auxLogits ? "--aux-logits"
                                        : nullptr;
  if (given && spec.name.empty())
    return makeError(llvm::Twine(given) + " applies to a built-in model (--model NAME)" +
                     (spec.path.empty() ? "" : ", not to '" + spec.path + "', which has its own"));
  spec.options.numClasses = flags.numClasses.value_or(0);
  spec.options.imageSize = flags.imageSize.value_or(0);
  spec.options.dropout = flags.dropout.value_or(-1);
  spec.options.auxLogits = flags.auxLogits;
  return llvm::Error::success();
}

llvm::Error checkPlacementFlags(const PlacementRequest &place) {
  if (place.gpus < 0)
    return makeError("--gpus " + llvm::Twine(place.gpus) +
                     ": the number of GPUs must be 0 or more (0: the host alone)");
  if (auto e = atLeastOne("--workers", place.workers, "the number of worker processes"))
    return e;
  if (auto e = checkAtLeast("--ps", place.ps, 0, "the number of parameter-server tasks"))
    return e;
  if (place.towers)
    return checkAtLeast("--towers", *place.towers, 0, "the number of towers");
  return llvm::Error::success();
}

llvm::Error checkBucketMb(double mb) {
  if (!(mb > 0) || !std::isfinite(mb))
    return makeError("--bucket-mb " + numberText(mb) + ": must be a positive number");
  return llvm::Error::success();
}

llvm::Error checkSyntheticData(const SyntheticData &data, int64_t modelClasses,
                               int64_t sampleBytes) {
  if (auto e = atLeastOne("--synthetic-samples", data.samples, "the number of samples"))
    return e;
  // The set is drawn sample by sample, but what it stands for must be a set
  // this process could hold: the loader's order alone takes 8 bytes a sample.
  int64_t perSample = std::max<int64_t>(sampleBytes, 8), bytes;
  if (data.samples &&
      (__builtin_mul_overflow(*data.samples, perSample, &bytes) || bytes > tensorByteLimit()))
    return makeError("--synthetic-samples " + llvm::Twine(*data.samples) + ": a set of " +
                     bytesText((int64_t)std::min<double>((double)*data.samples * (double)perSample,
                                                         (double)INT64_MAX)) +
                     " (" + bytesText(perSample) + " a sample) is more than " + tensorLimitText());
  if (data.classes && (*data.classes < 0 || *data.classes > modelClasses))
    return makeError("--synthetic-classes " + llvm::Twine(*data.classes) + ": the model has " +
                     llvm::Twine(modelClasses) + " classes, so from 1 to " +
                     llvm::Twine(modelClasses) + " (0: all of them)");
  return llvm::Error::success();
}

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
  if (auto e = atLeastOne("--eval-batch", opts.evalBatch, "the evaluation batch"))
    return e;
  if (auto e = checkPlacementFlags(opts.placement))
    return e;
  return checkThreadCount("--loader-threads", opts.loaderThreads, /*least=*/0);
}

} // namespace graphc
