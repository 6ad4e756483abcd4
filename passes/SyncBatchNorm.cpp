//===- SyncBatchNorm.cpp - The cross-tower BatchNorm rewrite ----------------===//
//
// New nodes are created through a Builder (appended) and moved one after the
// other to where the replaced node sat, so each tower's forward and backward
// keep their order and the collectives come in the same order on every
// tower.
//
//===----------------------------------------------------------------------===//

#include "passes/SyncBatchNorm.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"

namespace graphc {
namespace {

/// Creates nodes in a tower, each placed after the previous one.
class Inserter {
public:
  Inserter(Node &at, llvm::StringRef scope) : b_(at.graph()), anchor_(&at), scope_(b_, scope) {
    b_.setTower(at.tower());
    b_.setRequestedDevice(at.requestedDevice());
  }

  Node *node(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs, llvm::StringRef leaf) {
    return place(b_.createNode(op, operands, std::move(attrs), leaf));
  }
  Value *operator()(Op op, llvm::ArrayRef<Value *> operands, llvm::StringRef leaf,
                    Attrs attrs = {}) {
    return node(op, operands, std::move(attrs), leaf)->result();
  }
  Value *scalar(double v, DType t, llvm::StringRef leaf) {
    Tensor c(TensorType(t, {}));
    c.set(0, v);
    return place(b_.constant(std::move(c), leaf)->producer())->result();
  }
  /// ReduceSum over every axis but the channels: [C].
  Value *sumPerChannel(Value *v, llvm::StringRef leaf) {
    Ints axes;
    for (size_t i = 0; i < v->type().rank(); ++i)
      if (i != 1)
        axes.push_back((int64_t)i);
    Attrs a;
    a.set("axes", axes);
    a.set("keepdims", int64_t(0));
    return (*this)(Op::ReduceSum, {v}, leaf, std::move(a));
  }
  /// `v` as `to` (itself when it is already).
  Value *as(Value *v, DType to, llvm::StringRef leaf) {
    if (v->type().dtype == to)
      return v;
    Attrs a;
    a.set("to", to);
    return (*this)(Op::Cast, {v}, leaf, std::move(a));
  }
  /// A [C] vector shaped to broadcast against [N, C, ...].
  Value *perChannel(Value *v, size_t rank, llvm::StringRef leaf) {
    if (rank == 2)
      return v;
    Ints shape(rank, 1);
    shape[1] = v->type().shape[0];
    Attrs a;
    a.set("shape", shape);
    return (*this)(Op::Reshape, {v}, leaf, std::move(a));
  }
  /// Sums `values` over the towers (nothing to do for one tower).
  llvm::SmallVector<Value *, 2> allReduce(llvm::ArrayRef<Value *> values, llvm::StringRef leaf,
                                          llvm::StringRef group, unsigned rank, unsigned nranks) {
    if (nranks == 1)
      return llvm::SmallVector<Value *, 2>(values.begin(), values.end());
    Attrs a;
    a.set("group", group.str());
    a.set("rank", (int64_t)rank);
    a.set("nranks", (int64_t)nranks);
    a.set("reduction", std::string("sum"));
    Node *n = node(Op::AllReduce, values, std::move(a), leaf);
    llvm::SmallVector<Value *, 2> out;
    for (auto &r : n->results())
      out.push_back(r.get());
    return out;
  }
  Node *place(Node *n) {
    n->graph().moveAfter(n, anchor_);
    anchor_ = n;
    return n;
  }

private:
  Builder b_;
  Node *anchor_;
  Builder::Scope scope_;
};

struct LayerContext {
  std::string layer;
  unsigned rank, nranks;
  double count; ///< elements per channel over all towers
};

void rewriteGrad(Node &g, const LayerContext &lc, unsigned index) {
  Graph &graph = g.graph();
  Value *x = g.operand(0), *scale = g.operand(1), *mean = g.operand(2), *var = g.operand(3),
        *dy = g.operand(4);
  // 16-bit data (mixed precision) is synchronized in f32, its statistics' type.
  DType data = x->type().dtype, dt = scale->type().dtype;
  size_t rank = x->type().rank();
  Value *dx, *dscale, *dbias;
  {
    Inserter in(g, g.name() + "/sync");
    x = in.as(x, dt, "x_f32");
    dy = in.as(dy, dt, "dy_f32");
    Value *eps = in.scalar(g.attrs().getFloat("epsilon", 1e-5), dt, "epsilon");
    Value *invCount = in.scalar(1.0 / lc.count, dt, "inv_count");
    Value *stddev = in(Op::Sqrt, {in(Op::Add, {var, eps}, "var_eps")}, "std");
    Value *centered = in(Op::Sub, {x, in.perChannel(mean, rank, "mean_c")}, "centered");
    Value *xhat = in(Op::Div, {centered, in.perChannel(stddev, rank, "std_c")}, "xhat");
    dbias = in.sumPerChannel(dy, "local_dbias");
    dscale = in.sumPerChannel(in(Op::Mul, {dy, xhat}, "dy_xhat"), "local_dscale");
    std::string group = (llvm::Twine(lc.layer) + "/sync/grad").str();
    if (index)
      group.append("_").append(std::to_string(index));
    auto sums = in.allReduce({dbias, dscale}, "grad_sums", group, lc.rank, lc.nranks);
    Value *meanDy = in(Op::Mul, {sums[0], invCount}, "mean_dy");
    Value *meanDyXhat = in(Op::Mul, {sums[1], invCount}, "mean_dy_xhat");
    Value *inner = in(Op::Sub, {dy, in.perChannel(meanDy, rank, "mean_dy_c")}, "dy_centered");
    inner = in(Op::Sub,
               {inner, in(Op::Mul, {xhat, in.perChannel(meanDyXhat, rank, "mean_dy_xhat_c")},
                          "xhat_part")},
               "inner");
    Value *gain = in(Op::Div, {scale, stddev}, "gain");
    dx = in.as(in(Op::Mul, {inner, in.perChannel(gain, rank, "gain_c")}, "dx"), data, "dx_data");
  }
  g.result(0)->replaceAllUsesWith(dx);
  g.result(1)->replaceAllUsesWith(dscale);
  g.result(2)->replaceAllUsesWith(dbias);
  graph.erase(&g);
}

void rewriteForward(Node &bn, const LayerContext &lc) {
  Graph &g = bn.graph();
  Value *x = bn.operand(0), *scale = bn.operand(1), *bias = bn.operand(2);
  // 16-bit data (mixed precision): statistics in f32, the scale's type.
  DType dt = scale->type().dtype;
  size_t rank = x->type().rank();
  // The gradients that read this copy's statistics, before they are replaced.
  llvm::SmallVector<Node *, 1> grads;
  for (Node *u : bn.result(1)->users())
    if (u->op() == Op::BatchNormTrainGrad && u->operand(2) == bn.result(1) &&
        !llvm::is_contained(grads, u))
      grads.push_back(u);

  Value *mean, *var, *y;
  std::string name = bn.name();
  {
    Inserter in(bn, name + "/sync");
    Value *xd = x; // the data as it comes, for the normalization
    x = in.as(x, dt, "x_f32");
    Value *invCount = in.scalar(1.0 / lc.count, dt, "inv_count");
    Value *sum = in.allReduce({in.sumPerChannel(x, "local_sum")}, "sum", lc.layer + "/sync/sum",
                              lc.rank, lc.nranks)[0];
    mean = in(Op::Mul, {sum, invCount}, "mean");
    Value *centered = in(Op::Sub, {x, in.perChannel(mean, rank, "mean_c")}, "centered");
    Value *local = in.sumPerChannel(in(Op::Mul, {centered, centered}, "squares"), "local_sq");
    Value *sq = in.allReduce({local}, "sq", lc.layer + "/sync/sq", lc.rank, lc.nranks)[0];
    var = in(Op::Mul, {sq, invCount}, "var");
    g.rename(&bn, g.uniqueName(name + "/replaced"));
    Attrs a;
    if (const Attribute *eps = bn.attrs().find("epsilon"))
      a.set("epsilon", *eps);
    Builder plain(g);
    plain.setTower(bn.tower());
    plain.setRequestedDevice(bn.requestedDevice());
    // BatchNorm takes f32 statistics beside 16-bit data.
    y = in.place(plain.createNode(Op::BatchNorm, {xd, scale, bias, mean, var}, std::move(a), name))
            ->result();
  }
  bn.result(0)->replaceAllUsesWith(y);
  bn.result(1)->replaceAllUsesWith(mean);
  bn.result(2)->replaceAllUsesWith(var);
  g.erase(&bn);
  for (unsigned i = 0; i < grads.size(); ++i)
    rewriteGrad(*grads[i], lc, i);
}

} // namespace

llvm::Error synchronizeBatchNorm(llvm::ArrayRef<Node *> copies, llvm::StringRef layer) {
  LayerContext lc{layer.str(), 0, (unsigned)copies.size(), 0.0};
  for (Node *bn : copies) {
    const TensorType &t = bn->operand(0)->type();
    if (t.rank() < 2)
      return nodeError(*bn, "sync batch norm needs a channel axis, input is " + toString(t));
    lc.count += (double)(t.numElements() / t.shape[1]);
  }
  if (lc.count < 2)
    return nodeError(*copies.front(), "batch norm needs more than one value per channel over all "
                                      "towers");
  for (unsigned r = 0; r < copies.size(); ++r) {
    lc.rank = r;
    rewriteForward(*copies[r], lc);
  }
  return llvm::Error::success();
}

} // namespace graphc
