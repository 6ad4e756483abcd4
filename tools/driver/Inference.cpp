#include "tools/driver/Inference.h"

#include "ir/Diagnostics.h"
#include "ir/Npy.h"
#include "passes/strategy/Compile.h"
#include "tools/driver/InferInputs.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/Profile.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <chrono>

namespace graphc {

namespace {

/// The model and what --input feeds it, the model at the inputs' batch.
struct ModelAndInputs {
  LoadedModel model;
  std::vector<Tensor> inputs;
  int64_t batch = 0;
};

int64_t batchOf(const std::vector<Tensor> &inputs) {
  return inputs.empty() || inputs[0].shape().empty() ? 0 : inputs[0].shape()[0];
}

llvm::Expected<ModelAndInputs> loadWithInputs(const InferOptions &opts) {
  ModelAndInputs r;
  ModelSpec spec{opts.model, "", {}, 0, 0};
  // .npy files give their batch before the model is read; images and .npz
  // arrays are read for the model's inputs: the model first, at its own
  // batch, then rebatched to theirs.
  const bool npy = allNpy(opts.inputs);
  if (npy) {
    for (const std::string &path : opts.inputs) {
      auto t = readNpy(path);
      if (!t)
        return t.takeError();
      r.inputs.push_back(std::move(*t));
    }
    spec.batch = batchOf(r.inputs);
  }
  auto model = loadModel(spec);
  if (!model)
    return model.takeError();
  r.model = std::move(*model);
  if (!npy) {
    auto read = readInferInputs(opts.inputs, r.model.forward->main().inputs());
    if (!read)
      return read.takeError();
    r.inputs = std::move(*read);
    spec.batch = batchOf(r.inputs);
    if (auto e = rebatchTo(r.model, spec))
      return e;
  }
  r.batch = spec.batch;
  return r;
}

} // namespace

llvm::Error runInference(const InferOptions &opts, llvm::raw_ostream &out) {
  auto loaded = loadWithInputs(opts);
  if (!loaded)
    return loaded.takeError();
  Module &forward = *loaded->model.forward;
  const std::vector<Tensor> &inputs = loaded->inputs;
  const int64_t batch = loaded->batch;
  std::vector<Node *> graphInputs = forward.main().inputs();
  if (graphInputs.size() != inputs.size())
    return makeError("model '" + opts.model + "' has " + llvm::Twine(graphInputs.size()) +
                     " inputs, " + llvm::Twine(inputs.size()) + " were given");
  auto compiled = compileInference(forward, batch);
  if (!compiled)
    return compiled.takeError();
  llvm::StringMap<Tensor> feeds;
  std::vector<Node *> bound = (*compiled)->main().inputs();
  for (size_t i = 0; i < bound.size(); ++i) {
    const TensorType &want = bound[i]->result()->type();
    if (inputs[i].type() != want)
      return makeError("input '" + bound[i]->name() + "' expects " + toString(want) + ", '" +
                       opts.inputs[i] + "' holds " + toString(inputs[i].type()));
    feeds[bound[i]->name()] = inputs[i];
  }
  ExecutorOptions exec = opts.executor;
  exec.profile = opts.profile;
  auto ex = Executor::create(**compiled, exec);
  if (!ex)
    return ex.takeError();
  if (!(*ex)->algorithmNote().empty())
    out << "note: " << (*ex)->algorithmNote() << "\n";
  auto outs = (*ex)->run(feeds);
  if (!outs)
    return outs.takeError();
  if (opts.repeat > 0) {
    std::vector<double> ms;
    for (int i = 0; i < opts.repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      outs = (*ex)->run(feeds);
      if (!outs)
        return outs.takeError();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    double median = ms[ms.size() / 2], p90 = ms[std::min(ms.size() - 1, ms.size() * 9 / 10)];
    out << llvm::format("batch %lld, %d runs after a warm-up: median %.2f ms, min %.2f ms, p90 "
                        "%.2f ms; %.1f images/s\n",
                        (long long)batch, opts.repeat, median, ms.front(), p90,
                        1000.0 * (double)std::max<int64_t>(batch, 1) / median);
  }
  if (opts.profile)
    printProfile(**ex, out);
  for (size_t i = 0; i < outs->size(); ++i) {
    std::string path = opts.output;
    if (outs->size() > 1) {
      llvm::SmallString<256> p(opts.output);
      std::string ext = ".";
      ext += std::to_string(i);
      ext += ".npy";
      llvm::sys::path::replace_extension(p, ext);
      path = p.str().str();
    }
    if (auto e = writeNpy(path, (*outs)[i]))
      return e;
    out << "wrote " << path << " " << toString((*outs)[i].type()) << "\n";
  }
  return llvm::Error::success();
}

} // namespace graphc
