#include "kernels/KernelRunner.h"

#include "ir/Diagnostics.h"
#include "kernels/cpu/CpuBackend.h"

#include "llvm/ADT/DenseMap.h"

namespace graphc {

llvm::Expected<TensorView> TensorVariables::variable(llvm::StringRef name) {
  auto it = tensors.find(name);
  if (it == tensors.end())
    return makeError("no variable '" + name + "'");
  return viewOf(it->second);
}

TensorView viewOf(const Tensor &t) {
  TensorView v;
  v.data = const_cast<void *>(t.raw());
  v.dtype = t.dtype();
  v.shape.assign(t.shape().begin(), t.shape().end());
  return v;
}

llvm::Expected<std::vector<Tensor>> runNode(const Node &n, llvm::ArrayRef<Tensor> inputs,
                                            VariableAccess *variables, uint64_t step,
                                            uint64_t seed) {
  if (inputs.size() != n.numOperands())
    return nodeError(n, "expects " + llvm::Twine(n.numOperands()) + " inputs, given " +
                            llvm::Twine(inputs.size()));
  KernelEnv env;
  env.kind = DeviceKind::CPU;
  env.threads = cpuThreads();
  env.seed = seed;
  env.backend = &CpuBackend::instance();
  auto kernel = KernelRegistry::global().create(n, env);
  if (!kernel)
    return kernel.takeError();
  std::vector<Tensor> outputs;
  std::vector<TensorView> in, out;
  for (unsigned i = 0; i < inputs.size(); ++i) {
    if (inputs[i].type() != n.operand(i)->type())
      return nodeError(n, "input " + llvm::Twine(i) + " is " + toString(inputs[i].type()) +
                              ", expected " + toString(n.operand(i)->type()));
    in.push_back(viewOf(inputs[i]));
  }
  for (auto &r : n.results()) {
    if (!r->type().isStatic())
      return nodeError(n, "result '" + r->name() + "' has a symbolic shape; bind the batch first");
    outputs.emplace_back(r->type());
    out.push_back(viewOf(outputs.back()));
  }
  std::vector<unsigned char> scratchStorage((*kernel)->scratchBytes() + 64);
  void *scratch = scratchStorage.data() + (64 - (uintptr_t)scratchStorage.data() % 64) % 64;
  dnnl::stream stream(CpuBackend::instance().engine());
  KernelContext ctx;
  ctx.inputs = in;
  ctx.outputs = out;
  ctx.scratch = scratch;
  ctx.step = step;
  ctx.variables = variables;
  ctx.stream = &stream;
  if (auto e = (*kernel)->run(ctx))
    return e;
  stream.wait();
  return outputs;
}

llvm::Expected<std::vector<Tensor>> runGraph(const Graph &g, const llvm::StringMap<Tensor> &inputs,
                                             TensorVariables &variables, uint64_t step,
                                             uint64_t seed) {
  llvm::DenseMap<const Value *, Tensor> values;
  for (const Node *n : g.nodes()) {
    if (n->op() == Op::Input) {
      auto it = inputs.find(n->name());
      if (it == inputs.end())
        return nodeError(*n, "graph input '" + n->name() + "' was not given");
      if (it->second.type() != n->result()->type())
        return nodeError(*n, "given " + toString(it->second.type()) + ", expected " +
                                 toString(n->result()->type()));
      values[n->result()] = it->second;
      continue;
    }
    if (n->op() == Op::Variable) {
      auto it = variables.tensors.find(n->attrs().getString("var"));
      if (it == variables.tensors.end())
        return nodeError(*n, "no value for variable '" + n->attrs().getString("var") + "'");
      // A snapshot: updates later in the step must not change what was read.
      values[n->result()] = it->second.clone();
      continue;
    }
    std::vector<Tensor> in;
    for (const Value *v : n->operands())
      in.push_back(values.lookup(v));
    auto out = runNode(*n, in, &variables, step, seed);
    if (!out)
      return out.takeError();
    for (unsigned i = 0; i < n->numResults(); ++i)
      values[n->result(i)] = (*out)[i];
  }
  std::vector<Tensor> outs;
  for (const Value *v : g.outputs())
    outs.push_back(values.lookup(v));
  return outs;
}

} // namespace graphc
