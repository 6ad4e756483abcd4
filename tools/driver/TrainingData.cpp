#include "tools/driver/TrainingData.h"

#include "executor/data/OpenDataset.h"
#include "ir/Diagnostics.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/RunChecks.h"

#include <cstdio>

namespace graphc {

llvm::Expected<int64_t> numClasses(const Module &forward) {
  const Graph *g = forward.findGraph("main");
  if (!g || g->outputs().empty() || g->outputs()[0]->type().rank() != 2)
    return makeError("model '" + forward.name() +
                     "' must output logits [batch, classes] as its first output");
  return g->outputs()[0]->type().shape[1];
}

llvm::Expected<std::shared_ptr<const Dataset>> openDatasetFor(const Module &forward,
                                                              llvm::StringRef spec, Split split,
                                                              const SyntheticData &synthetic,
                                                              uint64_t seed) {
  auto in = dataInput(forward);
  if (!in)
    return in.takeError();
  auto classes = numClasses(forward);
  if (!classes)
    return classes.takeError();
  const TensorType &t = (*in)->result()->type();
  DatasetOptions o;
  o.split = split;
  o.samples = synthetic.samples.value_or(kDefaultSyntheticSamples);
  int64_t wanted = synthetic.classes.value_or(std::min(kDefaultSyntheticClasses, *classes));
  o.classes = wanted > 0 ? wanted : *classes;
  o.seed = seed;
  if (t.rank() == 4)
    o.shape = {t.shape[1], t.shape[2], t.shape[3]};
  else if (t.rank() == 2)
    o.shape = {1, 1, t.shape[1]};
  else
    return makeError("model input '" + (*in)->name() + "' is " + toString(t) +
                     "; graphrun feeds images [N, C, H, W] or flat samples [N, F]");
  if (spec == "synthetic")
    if (auto e = checkSyntheticData(synthetic, *classes,
                                    o.shape.channels * o.shape.height * o.shape.width * 4))
      return e;
  auto ds = openDataset(spec, o);
  if (!ds)
    return ds.takeError();
  if ((*ds)->numClasses() > *classes)
    return makeError("data set '" + spec + "' has " + llvm::Twine((*ds)->numClasses()) +
                     " classes but the model's logits have " + llvm::Twine(*classes) +
                     " (labels would be out of range): give the data set the model was "
                     "trained for, or train a built-in model with --num-classes " +
                     llvm::Twine((*ds)->numClasses()));
  return std::shared_ptr<const Dataset>(std::move(*ds));
}

LoaderOptions loaderOptionsFor(const Module &forward, const Dataset &ds, int64_t batch, bool train,
                               uint64_t seed, int threads) {
  const TensorType &t = (*dataInput(forward))->result()->type();
  LoaderOptions lo;
  lo.batch = batch;
  lo.shuffle = train;
  lo.dropLast = train;
  lo.seed = seed;
  lo.threads = threads;
  if (t.rank() == 4)
    lo.target = {t.shape[1], t.shape[2], t.shape[3]};
  else
    lo.target = ds.shape(); // a flat input takes the sample as it is
  return lo;
}

std::string dataOfIdentity(llvm::StringRef identity, SyntheticData &synthetic) {
  if (identity.empty())
    return "fashion-mnist"; // a checkpoint from before runs recorded their data
  if (!identity.consume_front("synthetic ("))
    return identity.str();
  long long samples = 0, classes = 0;
  if (std::sscanf(identity.str().c_str(), "%lld samples, %lld classes", &samples, &classes) == 2) {
    if (!synthetic.samples)
      synthetic.samples = samples;
    if (!synthetic.classes)
      synthetic.classes = classes;
  }
  return "synthetic";
}

std::string dataIdentity(const TrainOptions &opts) {
  if (opts.data != "synthetic")
    return opts.data;
  return "synthetic (" + std::to_string(opts.synthetic.samples.value_or(kDefaultSyntheticSamples)) +
         " samples, " + std::to_string(opts.synthetic.classes.value_or(kDefaultSyntheticClasses)) +
         " classes)";
}

} // namespace graphc
