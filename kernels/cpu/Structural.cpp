//===- Structural.cpp - Constants, variable reads, copies -------------------===//
//
// The executor usually aliases these (a Variable's result is the variable's
// storage, a Constant's is its attribute); the kernels exist so every op has
// a CPU kernel and the single-node runner can run any graph node.
//
//===----------------------------------------------------------------------===//

#include "ir/Diagnostics.h"
#include "kernels/cpu/CpuBackend.h"

#include <cstring>

namespace graphc {
namespace {

void copyBytes(const TensorView &to, const void *from) {
  if (to.bytes())
    std::memcpy(to.data, from, to.bytes());
}

class ConstantKernel : public Kernel {
public:
  ConstantKernel(const Node &n, const KernelEnv &) : value_(*n.attrs().getTensor("value")) {}
  llvm::Error run(KernelContext &ctx) override {
    copyBytes(ctx.outputs[0], value_.raw());
    return llvm::Error::success();
  }

private:
  Tensor value_;
};

class VariableKernel : public Kernel {
public:
  VariableKernel(const Node &n, const KernelEnv &) : node_(&n), var_(n.attrs().getString("var")) {}
  llvm::Error run(KernelContext &ctx) override {
    if (!ctx.variables)
      return nodeError(*node_, "no variable storage given");
    auto v = ctx.variables->variable(var_);
    if (!v)
      return v.takeError();
    copyBytes(ctx.outputs[0], v->data);
    return llvm::Error::success();
  }

private:
  const Node *node_;
  std::string var_;
};

/// Identity and Transfer between host devices: a copy.
class CopyKernel : public Kernel {
public:
  CopyKernel(const Node &, const KernelEnv &) {}
  llvm::Error run(KernelContext &ctx) override {
    if (ctx.outputs[0].data != ctx.inputs[0].data)
      copyBytes(ctx.outputs[0], ctx.inputs[0].data);
    return llvm::Error::success();
  }
  std::optional<unsigned> inPlaceOperand() const override { return 0; }
};

class InputKernel : public Kernel {
public:
  InputKernel(const Node &n, const KernelEnv &) : node_(&n) {}
  llvm::Error run(KernelContext &) override {
    return nodeError(*node_, "graph inputs are fed by the executor, not computed");
  }

private:
  const Node *node_;
};

} // namespace

void registerCpuStructuralKernels(KernelRegistry &r) {
  auto all = {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::Bool};
  r.add(Op::Input, DeviceKind::CPU, all, makeFactory<InputKernel>());
  r.add(Op::Constant, DeviceKind::CPU, all, makeFactory<ConstantKernel>());
  r.add(Op::Variable, DeviceKind::CPU, all, makeFactory<VariableKernel>());
  r.add(Op::Identity, DeviceKind::CPU, all, makeFactory<CopyKernel>());
  r.add(Op::Transfer, DeviceKind::CPU, all, makeFactory<CopyKernel>());
}

} // namespace graphc
