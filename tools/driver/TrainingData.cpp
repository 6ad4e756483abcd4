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

std::optional<SampleShape> imageShapeOf(const TensorType &t) {
  if (t.rank() == 2)
    return SampleShape{1, 1, t.shape[1]};
  if (t.rank() != 4)
    return std::nullopt;
  if (isChannelsLast(t))
    return SampleShape{t.shape[3], t.shape[1], t.shape[2]};
  return SampleShape{t.shape[1], t.shape[2], t.shape[3]};
}

bool isChannelsLast(const TensorType &t) {
  auto channels = [](int64_t c) { return c == 1 || c == 3; };
  return t.rank() == 4 && channels(t.shape[3]) && !channels(t.shape[1]);
}

namespace {

bool isTensorData(llvm::StringRef spec) {
  return spec.startswith("npz:");
}

/// What a tensor data set must hold for `forward`: its input's samples, and
/// the labels its loss takes.
TensorLayout tensorLayoutFor(const Module &forward, const TensorType &input) {
  TensorLayout l;
  l.input = TensorType(input.dtype, Dims(input.shape.begin() + 1, input.shape.end()));
  l.label = TensorType(DType::I64, {});
  if (forward.plan().loss == LossKind::Mse) {
    const TensorType &out = forward.findGraph("main")->outputs()[0]->type();
    l.label = TensorType(DType::F32, Dims(out.shape.begin() + 1, out.shape.end()));
  }
  return l;
}

} // namespace

llvm::Expected<std::shared_ptr<const Dataset>> openDatasetFor(const Module &forward,
                                                              llvm::StringRef spec, Split split,
                                                              const SyntheticData &synthetic,
                                                              uint64_t seed) {
  auto in = dataInput(forward);
  if (!in)
    return in.takeError();
  const bool mse = forward.plan().loss == LossKind::Mse;
  auto classes = mse ? llvm::Expected<int64_t>(0) : numClasses(forward);
  if (!classes)
    return classes.takeError();
  const TensorType &t = (*in)->result()->type();
  DatasetOptions o;
  o.split = split;
  o.seed = seed;
  if (isTensorData(spec)) {
    o.tensor = tensorLayoutFor(forward, t);
  } else {
    if (mse)
      return makeError("--loss mse trains on float targets, which '" + spec +
                       "' does not have (its labels are classes): give --data npz:FILE with "
                       "targets y [N, ...] shaped like the model's output");
    if (auto shape = imageShapeOf(t))
      o.shape = *shape;
    else
      return makeError("model input '" + (*in)->name() + "' is " + toString(t) +
                       "; graphrun feeds images [N, C, H, W] or [N, H, W, C], flat samples "
                       "[N, F], or any tensor from --data npz:FILE");
    if (!isFloat(t.dtype))
      return makeError("model input '" + (*in)->name() + "' is " + toString(t) + ", but '" +
                       spec + "' holds images; integer inputs (token ids) are fed from "
                       "--data npz:FILE");
    o.samples = synthetic.samples.value_or(kDefaultSyntheticSamples);
    int64_t wanted = synthetic.classes.value_or(std::min(kDefaultSyntheticClasses, *classes));
    o.classes = wanted > 0 ? wanted : *classes;
    if (spec == "synthetic")
      if (auto e = checkSyntheticData(synthetic, *classes, o.shape.numElements() * 4))
        return e;
  }
  auto ds = openDataset(spec, o);
  if (!ds)
    return ds.takeError();
  if (!mse && (*ds)->numClasses() > *classes)
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
  // An image input takes its own shape; a flat input and a tensor data set
  // take the sample as it is.
  lo.target = t.rank() == 4 && !ds.tensorLayout() ? *imageShapeOf(t) : ds.shape();
  lo.channelsLast = isChannelsLast(t);
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
