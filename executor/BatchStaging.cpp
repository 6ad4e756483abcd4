//===- BatchStaging.cpp - The batch split on a GPU, not on the host -------===//
//
// Each rule of BatchStaging.h looks at one node and its neighbours only; a
// node that does not match stays where the plan put it.
//
//===----------------------------------------------------------------------===//

#include "executor/BatchStaging.h"

#include "ir/DeviceId.h"

#include "llvm/ADT/SmallPtrSet.h"

namespace graphc {
namespace {

class Staging {
public:
  Staging(const Graph &g, llvm::function_ref<DeviceId(const Node &)> deviceOf)
      : g_(g), deviceOf_(deviceOf) {
    for (const Value *v : g.outputs())
      outputs_.insert(v);
  }

  llvm::DenseMap<const Node *, DeviceId> run() {
    for (const Node *n : g_.nodes()) {
      if (n->op() == Op::Input)
        stageInput(*n);
      else if (n->op() == Op::AddN || n->op() == Op::ConcatBatch)
        stageJoin(*n);
      else if (n->op() == Op::Transfer)
        stageOutputCopy(*n);
    }
    return std::move(moved_);
  }

private:
  DeviceKind kindOf(const Node &n) const { return deviceOf_(n).kind; }
  bool onHost(const Node &n) const { return kindOf(n) == DeviceKind::CPU; }
  bool onGpu(const Node &n) const { return kindOf(n) == DeviceKind::GPU; }
  /// Read by nothing but the graph's outputs.
  bool onlyAnOutput(const Value *v) const { return !v->hasUsers() && outputs_.count(v); }
  bool transferToGpu(const Node *n) const { return n->op() == Op::Transfer && onGpu(*n); }

  /// A SplitBatch on `host` whose every slice goes to GPUs by Transfers only.
  bool splitFeedsGpusOnly(const Node &split, DeviceId host) const {
    if (split.op() != Op::SplitBatch || deviceOf_(split) != host)
      return false;
    for (const auto &r : split.results()) {
      if (outputs_.count(r.get()))
        return false;
      for (const Node *u : r->users())
        if (!transferToGpu(u))
          return false;
    }
    return true;
  }

  /// Rule 1.
  void stageInput(const Node &in) {
    const Value *batch = in.result();
    if (!onHost(in) || outputs_.count(batch) || !batch->hasUsers())
      return;
    const DeviceId host = deviceOf_(in);
    llvm::SmallPtrSet<const Value *, 8> slices{batch};
    llvm::SmallVector<const Node *, 2> splits;
    for (const Node *u : batch->users()) {
      if (transferToGpu(u))
        continue;
      if (!splitFeedsGpusOnly(*u, host))
        return;
      if (!llvm::is_contained(splits, u))
        splits.push_back(u);
      for (const auto &r : u->results())
        slices.insert(r.get());
    }
    // The batch goes where the first non-empty slice goes.
    for (const Node *n : g_.nodes()) {
      if (n->op() != Op::Transfer || !slices.count(n->operand(0)) ||
          n->operand(0)->type().numElements() == 0)
        continue;
      const DeviceId gpu = deviceOf_(*n);
      moved_[&in] = gpu;
      for (const Node *s : splits)
        moved_[s] = gpu;
      return;
    }
  }

  /// Rule 2: a join of tower outputs.
  void stageJoin(const Node &join) {
    if (!onHost(join) || !onlyAnOutput(join.result()) || join.numOperands() == 0)
      return;
    const DeviceId host = deviceOf_(join);
    for (const Value *v : join.operands()) {
      const Node *copy = v->producer();
      if (copy->op() != Op::Transfer || deviceOf_(*copy) != host ||
          !onGpu(*copy->operand(0)->producer()) || outputs_.count(v) ||
          llvm::any_of(v->users(), [&](const Node *u) { return u != &join; }))
        return;
    }
    const DeviceId gpu = deviceOf_(*join.operand(0)->producer()->operand(0)->producer());
    moved_[&join] = gpu;
    for (const Value *v : join.operands())
      moved_[v->producer()] = gpu;
  }

  /// Rule 2: an output copied to the host and read by nothing.
  void stageOutputCopy(const Node &copy) {
    const Node &source = *copy.operand(0)->producer();
    if (onHost(copy) && onGpu(source) && onlyAnOutput(copy.result()))
      moved_[&copy] = deviceOf_(source);
  }

  const Graph &g_;
  llvm::function_ref<DeviceId(const Node &)> deviceOf_;
  llvm::SmallPtrSet<const Value *, 8> outputs_;
  llvm::DenseMap<const Node *, DeviceId> moved_;
};

} // namespace

llvm::DenseMap<const Node *, DeviceId>
stageBatchOnDevices(const Graph &g, llvm::function_ref<DeviceId(const Node &)> deviceOf) {
  return Staging(g, deviceOf).run();
}

} // namespace graphc
