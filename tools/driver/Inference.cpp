#include "tools/driver/Inference.h"

#include "ir/Diagnostics.h"
#include "ir/Npy.h"
#include "tools/driver/Compile.h"
#include "tools/driver/ModelSource.h"

#include "llvm/Support/Path.h"

namespace graphc {

llvm::Error runInference(const InferOptions &opts, llvm::raw_ostream &out) {
  auto model = loadModel({opts.model, "", {}, 0});
  if (!model)
    return model.takeError();
  std::vector<Tensor> inputs;
  for (const std::string &path : opts.inputs) {
    auto t = readNpy(path);
    if (!t)
      return t.takeError();
    inputs.push_back(std::move(*t));
  }
  std::vector<Node *> graphInputs = model->forward->main().inputs();
  if (graphInputs.size() != inputs.size())
    return makeError("model '" + opts.model + "' has " + llvm::Twine(graphInputs.size()) +
                     " inputs, " + llvm::Twine(inputs.size()) + " .npy files were given");
  int64_t batch = inputs[0].shape().empty() ? 0 : inputs[0].shape()[0];
  auto compiled = compileInference(*model->forward, batch);
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
  auto ex = Executor::create(**compiled, opts.executor);
  if (!ex)
    return ex.takeError();
  auto outs = (*ex)->run(feeds);
  if (!outs)
    return outs.takeError();
  for (size_t i = 0; i < outs->size(); ++i) {
    std::string path = opts.output;
    if (outs->size() > 1) {
      llvm::SmallString<256> p(opts.output);
      llvm::sys::path::replace_extension(p, "." + std::to_string(i) + ".npy");
      path = p.str().str();
    }
    if (auto e = writeNpy(path, (*outs)[i]))
      return e;
    out << "wrote " << path << " " << toString((*outs)[i].type()) << "\n";
  }
  return llvm::Error::success();
}

} // namespace graphc
