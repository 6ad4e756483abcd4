#include "passes/Rebatch.h"

#include "ir/Diagnostics.h"
#include "ir/ShapeInference.h"

#include "llvm/ADT/DenseMap.h"

namespace graphc {

bool batchInAttrs(Op op) {
  return op == Op::Reshape || op == Op::Expand || op == Op::ConvGradData ||
         op == Op::AveragePoolGrad || op == Op::GatherGrad;
}

namespace {

/// Where a Reshape to `out` (a shape at c.from) puts the batch of an operand
/// shaped `in` that carries it at `at`. Row-major, one sample of the operand
/// spans `step` elements (inner entries of its axis) and the batch B * step;
/// the result keeps the batch on axis j when j's entries are `step`-aligned
/// and the batch's span fits a whole number of times in j's span
/// ([L, N, E] -> [L, N * heads, E / heads], [L, N, E] -> [L * N, E] and back).
std::optional<BatchAxis> reshapedBatch(llvm::ArrayRef<int64_t> in, BatchAxis at,
                                       llvm::ArrayRef<int64_t> out, BatchChange c) {
  int64_t step = at.inner;
  for (size_t d = at.axis + 1; d < in.size(); ++d)
    step *= in[d];
  int64_t stride = 1; // of result axis j
  for (int j = (int)out.size() - 1; j >= 0; stride *= out[j], --j) {
    if (out[j] <= 0 || step % stride != 0 || (stride * out[j]) % (step * c.from) != 0)
      continue;
    if (out[j] == 1 && c.from != 1)
      continue;
    return BatchAxis{j, out[j] / c.from, step / stride};
  }
  return std::nullopt;
}

} // namespace

BatchAxis batchLayout(const Node &orig, unsigned result, BatchAxis found,
                      llvm::ArrayRef<Value *> operands,
                      llvm::function_ref<BatchAxis(const Value *)> axisOf, BatchChange c) {
  if (!found)
    return found;
  found.inner = found.multiple;
  if (orig.op() == Op::Reshape && !operands.empty()) {
    BatchAxis at0 = axisOf(operands[0]);
    Dims in(operands[0]->type().shape);
    if (at0) // the operand is at c.to here; the walk reads shapes at c.from
      in[at0.axis] = at0.multiple * c.from;
    Dims out(orig.result(result)->type().shape);
    out[found.axis] = found.multiple * c.from;
    if (auto r = at0 ? reshapedBatch(in, at0, out, c) : std::nullopt)
      if (r->axis == found.axis)
        found.inner = r->inner;
    return found;
  }
  for (const Value *v : operands)
    if (BatchAxis a = axisOf(v); a && a.multiple == found.multiple) {
      found.inner = a.inner;
      break;
    }
  return found;
}

bool expandMakesBatch(const Node &n, BatchChange c) {
  if (n.op() != Op::Expand)
    return false;
  Ints s = n.attrs().getInts("shape");
  const TensorType &in = n.operand(0)->type();
  // New leading axes, or (none) the operand's axis under s[0], of size 1.
  const int64_t extra = (int64_t)s.size() - (int64_t)in.rank();
  return !s.empty() && s[0] == c.from && (extra > 0 || in.shape[-extra] == 1);
}

llvm::Error rewriteBatchAttrs(const Node &orig, llvm::ArrayRef<Value *> operands,
                              llvm::function_ref<BatchAxis(const Value *)> axisOf, BatchChange c,
                              Attrs &attrs, llvm::StringRef consequence) {
  if (operands.empty() || !batchInAttrs(orig.op()))
    return llvm::Error::success();
  const Value &operand0 = *operands[0];
  BatchAxis at0 = axisOf(&operand0);
  auto lost = [&](llvm::StringRef attr, const Ints &s, const Value &from) {
    return nodeError(orig, "its " + attr + " " + shapeToString(s) + " does not keep the batch " +
                               llvm::Twine(c.from) + " of operand '" + from.name() +
                               "' on one dimension" + consequence);
  };
  // A shape whose first dimension holds the batch (times k): operand 0
  // carries it at axis 0, so the reshaped samples follow one another too.
  auto leadingBatch = [&](llvm::StringRef attr) -> llvm::Error {
    Ints s = attrs.getInts(attr);
    if (!at0)
      return llvm::Error::success();
    if (at0.axis != 0 || s.empty() || s[0] <= 0 || s[0] % c.from != 0)
      return lost(attr, s, operand0);
    s[0] = c.scaled(s[0]);
    attrs.set(attr, s);
    return llvm::Error::success();
  };
  switch (orig.op()) {
  case Op::Reshape: {
    if (!at0)
      return llvm::Error::success();
    Ints s = attrs.getInts("shape");
    std::optional<BatchAxis> out = reshapedBatch(operand0.type().shape, at0, s, c);
    if (!out)
      return lost("shape", s, operand0);
    s[out->axis] = c.scaled(s[out->axis]);
    attrs.set("shape", s);
    return llvm::Error::success();
  }
  case Op::ConvGradData:
  case Op::AveragePoolGrad:
    return leadingBatch("input_shape");
  case Op::GatherGrad: {
    // (indices, dy): dy is data_shape with the gathered axis replaced by the
    // indices' shape, so dy's batch axis names data_shape's, unless it lies
    // in the indices' part.
    BatchAxis at1 = operands.size() > 1 ? axisOf(operands[1]) : BatchAxis();
    if (!at1)
      return llvm::Error::success();
    Ints s = attrs.getInts("data_shape");
    int64_t axis = attrs.getInt("axis");
    axis = axis < 0 ? axis + (int64_t)s.size() : axis;
    int64_t idxRank = (int64_t)operand0.type().rank();
    if (at1.axis >= axis && at1.axis < axis + idxRank)
      return llvm::Error::success(); // the indices carry it (an embedding's lookup)
    int64_t at = at1.axis < axis ? at1.axis : at1.axis - idxRank + 1;
    if (at >= (int64_t)s.size() || s[at] % c.from != 0)
      return lost("data_shape", s, *operands[1]);
    s[at] = c.scaled(s[at]);
    attrs.set("data_shape", s);
    return llvm::Error::success();
  }
  case Op::Expand: {
    Ints s = attrs.getInts("shape");
    if (!at0) {
      if (expandMakesBatch(orig, c)) {
        s[0] = c.to;
        attrs.set("shape", s);
      }
      return llvm::Error::success();
    }
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
    found = {(int)d, o / c.from, o / c.from};
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
    axes_[n.result()] = {0, 1, 1};
    return llvm::Error::success();
  }

  llvm::Error node(Node &n) {
    bool batchedIn = false;
    for (const Value *v : n.operands())
      batchedIn |= (bool)axisOf(v);
    if (!batchedIn && !expandMakesBatch(n, c_))
      return llvm::Error::success();
    const std::string atBatch = ", so the model cannot run at batch " + std::to_string(c_.to);
    if (batchInAttrs(n.op()))
      attrs_.push_back({&n, n.attrs()});
    if (auto e = rewriteBatchAttrs(
            n, n.operands(), [&](const Value *v) { return axisOf(v); }, c_, n.attrs(), atBatch))
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
        axes_[r] = batchLayout(
            n, i, *a, n.operands(), [&](const Value *v) { return axisOf(v); }, c_);
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
