//===- TrainingMode.cpp - BatchNormTrain, moving averages, DropoutTrain -----===//
//
// Each rewrite frees the original node's name first (renaming it aside), so
// the training form is created under the same name and reads like the model;
// users are redirected and the original erased. New nodes are appended, so the
// graph is re-sorted at the end.
//
//===----------------------------------------------------------------------===//

#include "passes/TrainingMode.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/Random.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"

#include <bit>

namespace graphc {
namespace {

Value *scalarOf(Builder &b, double v, DType t, llvm::StringRef leaf) {
  Tensor c(TensorType(t, {}));
  c.set(0, v);
  return b.constant(std::move(c), leaf);
}

/// Renames `n` aside so its name can be reused by its replacement.
std::string freeName(Node &n) {
  std::string name = n.name();
  n.graph().rename(&n, n.graph().uniqueName(name + "/replaced"));
  return name;
}

llvm::Expected<std::string> runningStatistic(const Node &bn, unsigned operand) {
  const Node *p = bn.operand(operand)->producer();
  if (p->op() != Op::Variable)
    return nodeError(bn, "operand " + llvm::Twine(operand) + " '" + bn.operand(operand)->name() +
                             "' must be a running statistic read through a Variable node to be "
                             "updated in training mode");
  return p->attrs().getString("var");
}

llvm::Error switchBatchNorm(Node &bn) {
  Graph &g = bn.graph();
  const TensorType &xt = bn.operand(0)->type();
  int64_t perChannel = 1;
  for (size_t i = 0; i < xt.rank(); ++i) {
    if (i == 1)
      continue;
    if (xt.shape[i] == kBatchDim)
      return nodeError(bn, "training mode needs a bound batch to count elements per channel "
                           "(run bind-batch with --batch)");
    perChannel *= xt.shape[i];
  }
  if (perChannel < 2)
    return nodeError(bn, "training-mode batch norm needs more than one value per channel, input "
                         "is " +
                             toString(xt));
  auto meanVar = runningStatistic(bn, 3);
  if (!meanVar)
    return meanVar.takeError();
  auto varVar = runningStatistic(bn, 4);
  if (!varVar)
    return varVar.takeError();

  double momentum = bn.attrs().getFloat("momentum", 0.9);
  Value *x = bn.operand(0), *scale = bn.operand(1), *bias = bn.operand(2);
  Value *runningMean = bn.operand(3), *runningVar = bn.operand(4);
  Attrs attrs = bn.attrs();
  attrs.erase("training");

  Builder b = Builder::like(bn);
  std::string name = freeName(bn);
  Node *train = b.createNode(Op::BatchNormTrain, {x, scale, bias}, std::move(attrs), name);
  bn.result()->replaceAllUsesWith(train->result(0));
  g.erase(&bn);

  Builder::Scope scope(b, name);
  DType dt = runningMean->type().dtype;
  Value *keep = scalarOf(b, momentum, dt, "momentum");
  Value *meanWeight = scalarOf(b, 1.0 - momentum, dt, "mean_weight");
  double unbias = (double)perChannel / (double)(perChannel - 1);
  Value *varWeight = scalarOf(b, (1.0 - momentum) * unbias, dt, "var_weight");

  auto update = [&](Value *running, Value *batch, Value *weight, const std::string &var,
                    llvm::StringRef leaf) {
    Value *decayed = b.create(Op::Mul, {running, keep}, {}, leaf.str() + "/decayed");
    Value *fresh = b.create(Op::Mul, {batch, weight}, {}, leaf.str() + "/fresh");
    Value *next = b.create(Op::Add, {decayed, fresh}, {}, leaf.str() + "/next");
    Attrs a;
    a.set("var", var);
    b.createNode(Op::Assign, {next}, std::move(a), leaf);
  };
  update(runningMean, train->result(1), meanWeight, *meanVar, "update_mean");
  update(runningVar, train->result(2), varWeight, *varVar, "update_var");
  return llvm::Error::success();
}

void switchDropout(Node &d, const TrainingModeOptions &opts) {
  Attrs attrs = d.attrs();
  uint64_t salt = std::bit_cast<uint64_t>(opts.dropoutSeedSalt);
  uint64_t key = stableHash(d.name()) ^ (salt * 0x9e3779b97f4a7c15ull);
  attrs.set("ratio", d.attrs().getFloat("ratio", 0.5));
  attrs.set("seed", (int64_t)(key >> 1)); // non-negative
  Builder b = Builder::like(d);
  std::string name = freeName(d);
  Node *train = b.createNode(Op::DropoutTrain, {d.operand(0)}, std::move(attrs), name);
  d.result()->replaceAllUsesWith(train->result(0));
  d.graph().erase(&d);
}

} // namespace

llvm::Expected<bool> applyTrainingMode(Module &m, const TrainingModeOptions &opts) {
  Graph *g = m.findGraph("main");
  if (!g)
    return makeError("training-mode: the module has no graph 'main'");
  bool frozen = opts.bn == BnMode::Frozen;
  std::vector<Node *> batchNorms, dropouts;
  for (Node *n : g->nodes()) {
    if (n->op() == Op::BatchNorm && n->attrs().getInt("training") == 1 && !frozen)
      batchNorms.push_back(n);
    else if (n->op() == Op::Dropout)
      dropouts.push_back(n);
  }
  for (Node *n : batchNorms)
    if (auto e = switchBatchNorm(*n))
      return e;
  for (Node *n : dropouts)
    switchDropout(*n, opts);
  bool changed = !batchNorms.empty() || !dropouts.empty();
  if (changed && !g->sortTopologically())
    return makeError("training-mode: the graph has a cycle");
  if (m.plan().training != true) {
    m.plan().training = true;
    changed = true;
  }
  return changed;
}

InferenceExportSigns inferenceExportSigns(const Module &forward) {
  InferenceExportSigns signs;
  if (const auto &folded = forward.plan().exporterFolded; folded && !folded->empty()) {
    signs.foldedConvs = (int64_t)folded->size();
    signs.firstFolded = folded->front();
  }
  const Graph *g = forward.findGraph("main");
  if (!g)
    return signs;
  llvm::SmallVector<llvm::StringRef, 8> kerasScopes; // in order, each once
  llvm::StringSet<> seen, trained;
  for (const Node *n : g->nodes()) {
    llvm::StringRef name = n->name();
    if (size_t at = name.find("/batchnorm/"); at != llvm::StringRef::npos) {
      if (seen.insert(name.take_front(at)).second)
        kerasScopes.push_back(name.take_front(at));
    } else if (size_t at = name.find("/moments/"); at != llvm::StringRef::npos) {
      trained.insert(name.take_front(at));
    }
  }
  for (llvm::StringRef scope : kerasScopes)
    if (!trained.contains(scope) && signs.convertedBatchNorms++ == 0)
      signs.firstConverted = scope.str();
  for (const Node *n : g->nodes()) {
    if (n->op() == Op::Dropout) {
      ++signs.dropouts;
    } else if (n->op() == Op::BatchNorm && n->attrs().getInt("training") != 1) {
      if (signs.frozenBatchNorms++ == 0)
        signs.firstFrozen = n->name();
    } else if (n->op() == Op::Conv) {
      const Node *w = n->operand(1)->producer();
      if (w->op() != Op::Variable)
        continue;
      std::string var = w->attrs().getString("var");
      if (llvm::StringRef(var).startswith("onnx::Conv_") && !forward.plan().exporterFolded &&
          signs.foldedConvs++ == 0)
        signs.firstFolded = var;
    }
  }
  return signs;
}

} // namespace graphc
