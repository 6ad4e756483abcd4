#include "kernels/KernelRunner.h"

#include "ir/Diagnostics.h"
#include "kernels/cpu/CpuBackend.h"

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

} // namespace graphc
