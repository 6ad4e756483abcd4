#include "passes/Rebatch.h"

#include "ir/Diagnostics.h"
#include "ir/ShapeInference.h"

#include "llvm/ADT/DenseMap.h"

namespace graphc {

bool batchInAttrs(Op op) {
  return op == Op::Reshape || op == Op::Expand || op == Op::ConvGradData ||
         op == Op::AveragePoolGrad;
}

llvm::Error rewriteBatchAttrs(const Node &orig, const Value &operand0, BatchAxis at0,
                              BatchChange c, Attrs &attrs, llvm::StringRef consequence) {
  if (!at0 || !batchInAttrs(orig.op()))
    return llvm::Error::success();
  // A shape whose first dimension holds the batch (times k): operand 0
  // carries it at axis 0, so the reshaped samples follow one another too.
  auto leadingBatch = [&](llvm::StringRef attr) -> llvm::Error {
    Ints s = attrs.getInts(attr);
    if (at0.axis != 0 || s.empty() || s[0] <= 0 || s[0] % c.from != 0)
      return nodeError(orig, "its " + attr + " " + shapeToString(s) + " does not keep the batch " +
                                 llvm::Twine(c.from) + " of operand '" + operand0.name() +
                                 "' as its first dimension" + consequence);
    s[0] = c.scaled(s[0]);
    attrs.set(attr, s);
    return llvm::Error::success();
  };
  switch (orig.op()) {
  case Op::Reshape:
    return leadingBatch("shape");
  case Op::ConvGradData:
  case Op::AveragePoolGrad:
    return leadingBatch("input_shape");
  case Op::Expand: {
    Ints s = attrs.getInts("shape");
    int64_t at = at0.axis + (int64_t)s.size() - (int64_t)operand0.type().rank();
    if (at >= 0 && at < (int64_t)s.size() && s[at] == at0.multiple * c.from) {
      s[at] = at0.multiple * c.to;
      attrs.set("shape", s);
    }
    return llvm::Error::success();
  }
  default:
    return llvm::Error::success();
  }
}

std::optional<BatchAxis> followBatch(const TensorType &before, const TensorType &after,
                                     BatchChange c) {
  if (before.dtype != after.dtype || before.rank() != after.rank())
    return std::nullopt;
  BatchAxis found;
  for (size_t d = 0; d < before.rank(); ++d) {
    int64_t o = before.shape[d], t = after.shape[d];
    if (o == t)
      continue;
    if (found || o <= 0 || o % c.from != 0 || c.scaled(o) != t)
      return std::nullopt;
    found = {(int)d, o / c.from};
  }
  return found;
}

namespace {

/// Ops that may read the batch and return values without it: the reduction
/// is over whichever samples there are.
bool reducesOverBatch(Op op) {
  return op == Op::ReduceMean || op == Op::ReduceSum || op == Op::SoftmaxCrossEntropy;
}

/// rebatch's walk, with what it changed so that an error can undo it.
class Rebatcher {
public:
  explicit Rebatcher(BatchChange c) : c_(c) {}

  llvm::Error run(Graph &g) {
    for (Node *n : g.nodes())
      if (auto e = n->op() == Op::Input ? input(*n) : node(*n))
        return e;
    return llvm::Error::success();
  }

  void undo() {
    for (auto &[v, t] : types_)
      v->setType(t);
    for (auto &[n, a] : attrs_)
      n->attrs() = a;
  }

private:
  llvm::Error input(Node &n) {
    TensorType t = n.result()->type();
    if (t.rank() == 0 || t.shape[0] != c_.from)
      return llvm::Error::success();
    types_.push_back({n.result(), t});
    t.shape[0] = c_.to;
    n.result()->setType(t);
    axes_[n.result()] = {0, 1};
    return llvm::Error::success();
  }

  llvm::Error node(Node &n) {
    bool batchedIn = false;
    for (const Value *v : n.operands())
      batchedIn |= (bool)axisOf(v);
    if (!batchedIn)
      return llvm::Error::success();
    const std::string atBatch = ", so the model cannot run at batch " + std::to_string(c_.to);
    if (batchInAttrs(n.op()))
      attrs_.push_back({&n, n.attrs()});
    if (n.numOperands() > 0)
      if (auto e = rewriteBatchAttrs(n, *n.operand(0), axisOf(n.operand(0)), c_, n.attrs(),
                                     atBatch))
        return e;
    auto types = inferResultTypes(n);
    if (!types)
      return withContext(types.takeError(), "at batch " + llvm::Twine(c_.to) +
                                                " (the model's shapes are fixed for batch " +
                                                llvm::Twine(c_.from) + ")");
    bool batchedOut = false;
    for (unsigned i = 0; i < n.numResults(); ++i) {
      Value *r = n.result(i);
      const TensorType &now = (*types)[i];
      std::optional<BatchAxis> a = followBatch(r->type(), now, c_);
      if (!a)
        return nodeError(n, "result '" + r->name() + "' would be " + toString(now) +
                                " instead of " + toString(r->type()) +
                                "; the node mixes the batch with other dimensions" + atBatch);
      types_.push_back({r, r->type()});
      r->setType(now);
      if (*a) {
        axes_[r] = *a;
        batchedOut = true;
      }
    }
    if (!batchedOut && !reducesOverBatch(n.op()))
      return nodeError(n, "reads the batch but its results do not carry it (rows chosen for "
                          "batch " +
                              llvm::Twine(c_.from) + ")" + atBatch);
    return llvm::Error::success();
  }

  BatchAxis axisOf(const Value *v) const {
    auto it = axes_.find(v);
    return it == axes_.end() ? BatchAxis{} : it->second;
  }

  BatchChange c_;
  llvm::DenseMap<const Value *, BatchAxis> axes_;
  std::vector<std::pair<Value *, TensorType>> types_;
  std::vector<std::pair<Node *, Attrs>> attrs_;
};

} // namespace

llvm::Error rebatch(Module &m, int64_t batch) {
  if (batch <= 0)
    return makeError("batch size must be positive, got " + llvm::Twine(batch));
  std::optional<int64_t> bound = m.batch();
  if (!bound)
    return bindBatch(m, batch);
  if (*bound == batch)
    return llvm::Error::success();
  Rebatcher r({*bound, batch});
  for (Graph *g : m.graphs())
    if (auto e = r.run(*g)) {
      r.undo();
      return e;
    }
  m.plan().batch = batch;
  return llvm::Error::success();
}

} // namespace graphc
