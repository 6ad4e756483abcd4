//===- OnnxOpImportRecurrent.cpp - LSTM and GRU, unrolled ------------------===//
//
// ONNX's LSTM and GRU as PyTorch exports them become our existing ops, one
// cell per time step, so they train with the gradients and run on the
// kernels those ops already have: no recurrent op, kernel or gradient rule of
// their own.
//
// Per direction d (forward walks t = 0..L-1, reverse L-1..0):
//   XW = X[L, N, I] @ W[d]^T + biases    one MatMul for every step at once
//   LSTM (gates i, o, f, c as ONNX orders them):
//     g = XW[t] + H @ R[d]^T;  i, o, f = sigmoid;  c~ = tanh
//     C = f * C + i * c~;      H = o * tanh(C)
//   GRU (gates z, r, h; PyTorch writes linear_before_reset = 1):
//     z, r = sigmoid(XW[t] + H @ R^T + Rb)
//     h~ = tanh(XW_h[t] + r * (H @ R_h^T + Rb_h))          linear_before_reset = 1
//     h~ = tanh(XW_h[t] + (r * H) @ R_h^T + Rb_h)          linear_before_reset = 0
//     H = (1 - z) * h~ + z * H
// An absent initial state, or one known to be zeros (PyTorch's default),
// is zero, so the first step leaves out the terms it would multiply (no
// zeros tensor of the batch's size is needed). Outputs:
// Y [L, D, N, H], Y_h [D, N, H] and (LSTM) Y_c [D, N, H], each built only
// when something reads it.
//
// Refused, each with one message: a sequence length unknown at import (X's
// dimension 0), layout = 1, sequence_lens, peepholes (P), clip, activations
// other than the defaults, activation_alpha/beta, input_forget = 1.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"

#include "ir/ShapeInference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

namespace graphc::onnxfe {
namespace {

/// Creates the unrolled nodes under the ONNX node's name. The first error is
/// kept (finish() returns it); a node with a null operand is not created and
/// gives null, so an error stops the rest without a check at every step.
class Unroller {
public:
  explicit Unroller(NodeContext &ctx) : ctx_(ctx), imp_(ctx.importer()) {}

  llvm::SmallVector<Value *, 4> makeAll(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs,
                                        const llvm::Twine &leaf, size_t results = 1) {
    if (err_ || llvm::is_contained(operands, nullptr))
      return llvm::SmallVector<Value *, 4>(results, nullptr);
    std::string name = imp_.uniqueName(ctx_.name() + "/" + leaf.str());
    std::vector<std::string> names;
    for (size_t i = 0; i < results; ++i)
      names.push_back(results == 1 ? name : name + ":" + std::to_string(i));
    auto n = createInferredNode(imp_.graph(), op, operands, names, std::move(attrs), name);
    if (!n) {
      err_ = ctx_.fail("while unrolling: " + llvm::toString(n.takeError()));
      return llvm::SmallVector<Value *, 4>(results, nullptr);
    }
    llvm::SmallVector<Value *, 4> out;
    for (size_t i = 0; i < results; ++i)
      out.push_back((*n)->result(i));
    return out;
  }
  Value *make(Op op, llvm::ArrayRef<Value *> operands, const llvm::Twine &leaf, Attrs attrs = {}) {
    return makeAll(op, operands, std::move(attrs), leaf)[0];
  }

  Value *slice(Value *v, int64_t axis, int64_t begin, int64_t end, const llvm::Twine &leaf) {
    Attrs a;
    a.set("starts", Ints{begin});
    a.set("ends", Ints{end});
    a.set("axes", Ints{axis});
    return make(Op::Slice, {v}, leaf, std::move(a));
  }
  /// Row `d` of a tensor, without its leading axis.
  Value *row(Value *v, int64_t d, const llvm::Twine &leaf) {
    Attrs a;
    a.set("axes", Ints{0});
    return make(Op::Squeeze, {slice(v, 0, d, d + 1, leaf + "_slice")}, leaf, std::move(a));
  }
  Value *transpose(Value *v, const llvm::Twine &leaf) {
    Attrs a;
    a.set("perm", Ints{1, 0});
    return make(Op::Transpose, {v}, leaf, std::move(a));
  }
  Value *unsqueeze(Value *v, Ints axes, const llvm::Twine &leaf) {
    Attrs a;
    a.set("axes", std::move(axes));
    return make(Op::Unsqueeze, {v}, leaf, std::move(a));
  }
  Value *concat(llvm::ArrayRef<Value *> vs, int64_t axis, const llvm::Twine &leaf) {
    if (vs.size() == 1)
      return vs[0];
    Attrs a;
    a.set("axis", axis);
    return make(Op::Concat, vs, leaf, std::move(a));
  }
  /// Pieces of v along `axis`, of `sizes`.
  llvm::SmallVector<Value *, 4> split(Value *v, int64_t axis, Ints sizes, const llvm::Twine &leaf) {
    if (sizes.size() == 1)
      return {v};
    size_t parts = sizes.size();
    Attrs a;
    a.set("axis", axis);
    a.set("split", std::move(sizes));
    return makeAll(Op::Split, {v}, std::move(a), leaf, parts);
  }
  /// a + b, where an absent (null) term is zero.
  Value *add(Value *a, Value *b, const llvm::Twine &leaf) {
    if (!a || !b)
      return a ? a : b;
    return make(Op::Add, {a, b}, leaf);
  }
  Value *one() {
    if (!one_) {
      Attrs a;
      a.set("value", Tensor::scalar(1.0f));
      one_ = make(Op::Constant, {}, "one", std::move(a));
    }
    return one_;
  }

  llvm::Error finish() { return err_ ? std::move(err_) : llvm::Error::success(); }

private:
  NodeContext &ctx_;
  Importer &imp_;
  llvm::Error err_ = llvm::Error::success();
  Value *one_ = nullptr;
};

enum class Cell { LSTM, GRU };

struct Shapes {
  int64_t seq = 0, hidden = 0, dirs = 1;
  bool reverseOnly = false;
};

/// The attribute and input checks both cells share; the sizes they fix.
llvm::Expected<Shapes> checkCell(NodeContext &ctx, Cell cell) {
  Shapes s;
  llvm::StringRef gates = cell == Cell::LSTM ? "4" : "3";
  std::string direction = ctx.getString("direction", "forward");
  if (direction == "bidirectional")
    s.dirs = 2;
  else if (direction == "reverse")
    s.reverseOnly = true;
  else if (direction != "forward")
    return ctx.fail("direction '" + direction + "' is not forward, reverse or bidirectional");
  if (ctx.getInt("layout", 0) != 0)
    return ctx.fail("layout 1 (batch first) is not supported; PyTorch writes layout 0");
  if (ctx.attr("clip"))
    return ctx.fail("attribute 'clip' is not supported (PyTorch's cells do not clip)");
  if (ctx.attr("activation_alpha") || ctx.attr("activation_beta"))
    return ctx.fail("attributes 'activation_alpha' and 'activation_beta' are not supported");
  if (cell == Cell::LSTM && ctx.getInt("input_forget", 0) != 0)
    return ctx.fail("input_forget = 1 (coupled input and forget gates) is not supported");
  if (const onnx::AttributeProto *a = ctx.attr("activations")) {
    llvm::SmallVector<llvm::StringRef, 3> want = {"Sigmoid", "Tanh"};
    if (cell == Cell::LSTM)
      want.push_back("Tanh");
    for (int i = 0; i < a->strings_size(); ++i)
      if (a->strings(i) != want[i % want.size()])
        return ctx.fail("activation '" + a->strings(i) + "' is not supported; only the default " +
                        (cell == Cell::LSTM ? "Sigmoid, Tanh, Tanh" : "Sigmoid, Tanh") + " unroll");
  }
  if (ctx.hasInput(4))
    return ctx.fail("input sequence_lens is not supported: every sequence runs its full length");
  if (cell == Cell::LSTM && ctx.hasInput(7))
    return ctx.fail("peephole weights (input P) are not supported");
  if (!ctx.hasInput(0) || !ctx.hasInput(1) || !ctx.hasInput(2))
    return ctx.fail("needs inputs X, W and R");

  auto x = ctx.inputType(0), w = ctx.inputType(1), r = ctx.inputType(2);
  if (!x)
    return x.takeError();
  if (!w)
    return w.takeError();
  if (!r)
    return r.takeError();
  if (x->rank() != 3)
    return ctx.fail("X must be [sequence, batch, input], not " + toString(*x));
  s.seq = x->shape[0];
  if (s.seq == kBatchDim || s.seq <= 0)
    return ctx.fail("the sequence length (dimension 0 of X, " + toString(*x) +
                    ") is unknown at import; graphc unrolls the cell over a fixed length, so "
                    "export the model with a static sequence length");
  s.hidden = ctx.getInt("hidden_size", 0);
  if (s.hidden <= 0)
    return ctx.fail("needs a positive attribute 'hidden_size'");
  int64_t g = cell == Cell::LSTM ? 4 : 3, gh = g * s.hidden, in = x->shape[2];
  auto expect = [&](const TensorType &t, Dims want, llvm::StringRef what) -> llvm::Error {
    if (t.shape == want)
      return llvm::Error::success();
    return ctx.fail(what + " must be " + shapeToString(llvm::ArrayRef<int64_t>(want)) + " (" +
                    gates + " gates of hidden_size " + llvm::Twine(s.hidden) + "), not " +
                    toString(t));
  };
  if (auto e = expect(*w, {s.dirs, gh, in}, "W"))
    return e;
  if (auto e = expect(*r, {s.dirs, gh, s.hidden}, "R"))
    return e;
  if (ctx.hasInput(3)) {
    auto b = ctx.inputType(3);
    if (!b)
      return b.takeError();
    if (auto e = expect(*b, {s.dirs, 2 * gh}, "B"))
      return e;
  }
  for (unsigned i : {5u, 6u}) {
    if (i == 6 && cell == Cell::GRU)
      break;
    if (!ctx.hasInput(i))
      continue;
    auto t = ctx.inputType(i);
    if (!t)
      return t.takeError();
    if (t->rank() != 3 || t->shape[0] != s.dirs || t->shape[1] != x->shape[1] ||
        t->shape[2] != s.hidden)
      return ctx.fail(llvm::Twine(i == 5 ? "initial_h" : "initial_c") + " must be [" +
                      llvm::Twine(s.dirs) + ", batch, " + llvm::Twine(s.hidden) + "], not " +
                      toString(*t));
  }
  return s;
}

/// One direction's weights, read from W, R and B.
struct Direction {
  Value *wT = nullptr; ///< [I, G*H]
  Value *rT = nullptr; ///< [H, G*H]
  Value *wb = nullptr; ///< [G*H] or null
  Value *rb = nullptr; ///< [G*H] or null
  Value *h0 = nullptr, *c0 = nullptr;
};

/// Whether value `name` is zeros known at import: a known value, or one that
/// ops which only move or repeat values (Expand, Slice, Reshape, ...) made of
/// a known zero, whatever the shape they give it.
bool zerosAtImport(const Importer &imp, llvm::StringRef name) {
  static const llvm::StringSet<> kMovers = {"Expand",    "Slice",   "Reshape", "Unsqueeze",
                                            "Squeeze",   "Identity", "Cast",   "Transpose",
                                            "Flatten"};
  for (int depth = 0; depth < 16; ++depth) {
    const Slot *s = imp.slot(name);
    if (s && s->knownAtImport() && !s->known->foreignType) {
      const Tensor &t = s->known->data;
      for (int64_t j = 0; j < t.numElements(); ++j)
        if (t.at(j) != 0)
          return false;
      return true;
    }
    const onnx::NodeProto *p = imp.producerOf(name);
    if (!p || !kMovers.contains(p->op_type()) || p->input_size() == 0)
      return false;
    name = p->input(0);
  }
  return false;
}

llvm::Error importRecurrent(NodeContext &ctx, Cell cell) {
  auto shapes = checkCell(ctx, cell);
  if (!shapes)
    return shapes.takeError();
  const Shapes s = *shapes;
  const int64_t h = s.hidden, g = cell == Cell::LSTM ? 4 : 3, gh = g * h;
  const bool linearBeforeReset = ctx.getInt("linear_before_reset", 0) != 0;

  // PyTorch passes zeros of [D, N, H] (ConstantOfShape; the dynamo exporter
  // a scalar 0 expanded and sliced) when the caller gives no state: known
  // zeros are an absent state, so no batch-sized value enters the cell.
  auto knownZeros = [&](unsigned i) { return zerosAtImport(ctx.importer(), ctx.inputName(i)); };
  llvm::SmallVector<Value *, 8> in(8, nullptr);
  for (unsigned i = 0; i < 7; ++i) {
    if (!ctx.hasInput(i) || (i == 6 && cell == Cell::GRU) || (i >= 5 && knownZeros(i)))
      continue;
    auto v = ctx.input(i);
    if (!v)
      return v.takeError();
    in[i] = *v;
  }

  Unroller u(ctx);
  // Y per direction in time order, and each direction's last H and C.
  llvm::SmallVector<llvm::SmallVector<Value *, 16>, 2> ys(s.dirs);
  llvm::SmallVector<Value *, 2> lastH, lastC;
  for (int64_t d = 0; d < s.dirs; ++d) {
    std::string dir = s.dirs == 2 ? (d ? "reverse/" : "forward/") : "";
    bool reverse = d == 1 || s.reverseOnly;
    Direction w;
    w.wT = u.transpose(u.row(in[1], d, dir + "W"), dir + "W_t");
    w.rT = u.transpose(u.row(in[2], d, dir + "R"), dir + "R_t");
    if (in[3]) {
      Value *b = u.row(in[3], d, dir + "B");
      w.wb = u.slice(b, 0, 0, gh, dir + "Wb");
      w.rb = u.slice(b, 0, gh, 2 * gh, dir + "Rb");
    }
    if (in[5])
      w.h0 = u.row(in[5], d, dir + "initial_h");
    if (in[6])
      w.c0 = u.row(in[6], d, dir + "initial_c");

    // Every step's input projection at once: [L, N, G*H].
    Value *bias = cell == Cell::LSTM ? u.add(w.wb, w.rb, dir + "bias") : w.wb;
    Value *xw = u.add(u.make(Op::MatMul, {in[0], w.wT}, dir + "XW"), bias, dir + "XW_bias");
    llvm::SmallVector<Value *, 4> steps = u.split(xw, 0, Ints(s.seq, 1), dir + "steps");
    // GRU's recurrent bias in parts (z and r together, h alone).
    Value *rbZR = nullptr, *rbH = nullptr, *rTZR = nullptr, *rTH = nullptr;
    if (cell == Cell::GRU) {
      if (w.rb) {
        rbZR = u.slice(w.rb, 0, 0, 2 * h, dir + "Rb_zr");
        rbH = u.slice(w.rb, 0, 2 * h, 3 * h, dir + "Rb_h");
      }
      if (!linearBeforeReset) {
        rTZR = u.slice(w.rT, 1, 0, 2 * h, dir + "R_t_zr");
        rTH = u.slice(w.rT, 1, 2 * h, 3 * h, dir + "R_t_h");
      }
    }

    Value *hPrev = w.h0, *cPrev = w.c0;
    ys[d].assign(s.seq, nullptr);
    for (int64_t k = 0; k < s.seq; ++k) {
      int64_t t = reverse ? s.seq - 1 - k : k;
      std::string p = dir + "t" + std::to_string(t) + "/";
      Attrs sq;
      sq.set("axes", Ints{0});
      Value *xt = u.make(Op::Squeeze, {steps[t]}, p + "x", std::move(sq)); // [N, G*H]
      Value *hNext = nullptr;
      if (cell == Cell::LSTM) {
        Value *gatesV =
            u.add(xt, hPrev ? u.make(Op::MatMul, {hPrev, w.rT}, p + "HR") : nullptr, p + "gates");
        // Without a previous C the forget gate is unused: slice around it, as
        // a Split result nobody reads would take zeros of the batch's shape
        // as its gradient.
        llvm::SmallVector<Value *, 4> q;
        if (cPrev) {
          q = u.split(gatesV, 1, Ints(4, h), p + "split");
        } else {
          q = u.split(u.slice(gatesV, 1, 0, 2 * h, p + "io"), 1, {h, h}, p + "split");
          q.push_back(nullptr);
          q.push_back(u.slice(gatesV, 1, 3 * h, 4 * h, p + "c_in"));
        }
        Value *i = u.make(Op::Sigmoid, {q[0]}, p + "i");
        Value *o = u.make(Op::Sigmoid, {q[1]}, p + "o");
        Value *candidate = u.make(Op::Tanh, {q[3]}, p + "c_candidate");
        Value *ic = u.make(Op::Mul, {i, candidate}, p + "i_c");
        Value *kept = nullptr;
        if (cPrev)
          kept = u.make(Op::Mul, {u.make(Op::Sigmoid, {q[2]}, p + "f"), cPrev}, p + "f_c");
        cPrev = u.add(kept, ic, p + "C");
        hNext = u.make(Op::Mul, {o, u.make(Op::Tanh, {cPrev}, p + "tanh_C")}, p + "H");
      } else {
        // z and r together ([N, 2H]), h alone.
        llvm::SmallVector<Value *, 4> x2 = u.split(xt, 1, {2 * h, h}, p + "x_split");
        Value *hZR = nullptr, *hH = nullptr; // the recurrent terms, with their biases
        if (hPrev && linearBeforeReset) {
          Value *hr = u.add(u.make(Op::MatMul, {hPrev, w.rT}, p + "HR"), w.rb, p + "HR_bias");
          llvm::SmallVector<Value *, 4> h2 = u.split(hr, 1, {2 * h, h}, p + "HR_split");
          hZR = h2[0];
          hH = h2[1];
        } else {
          hZR = u.add(hPrev ? u.make(Op::MatMul, {hPrev, rTZR}, p + "HR_zr") : nullptr, rbZR,
                      p + "HR_zr_bias");
          hH = linearBeforeReset ? rbH : nullptr;
        }
        Value *zr = u.make(Op::Sigmoid, {u.add(x2[0], hZR, p + "zr_in")}, p + "zr");
        llvm::SmallVector<Value *, 4> zr2 = u.split(zr, 1, {h, h}, p + "zr_split");
        Value *z = zr2[0], *r = zr2[1];
        Value *reset = nullptr;
        if (linearBeforeReset) {
          reset = hH ? u.make(Op::Mul, {r, hH}, p + "r_HR") : nullptr;
        } else {
          Value *rh =
              hPrev ? u.make(Op::MatMul, {u.make(Op::Mul, {r, hPrev}, p + "r_H"), rTH}, p + "rH_R")
                    : nullptr;
          reset = u.add(rh, rbH, p + "rH_R_bias");
        }
        Value *candidate = u.make(Op::Tanh, {u.add(x2[1], reset, p + "h_in")}, p + "h_candidate");
        Value *fresh = u.make(
            Op::Mul, {u.make(Op::Sub, {u.one(), z}, p + "one_minus_z"), candidate}, p + "new_part");
        hNext = u.add(fresh, hPrev ? u.make(Op::Mul, {z, hPrev}, p + "z_H") : nullptr, p + "H");
      }
      hPrev = hNext;
      ys[d][t] = hNext;
    }
    lastH.push_back(hPrev);
    lastC.push_back(cPrev);
  }

  Importer &imp = ctx.importer();
  auto wanted = [&](unsigned out) {
    if (out >= (unsigned)ctx.proto().output_size() || ctx.proto().output(out).empty())
      return false;
    return imp.isRead(ctx.proto().output(out));
  };
  if (wanted(0)) {
    llvm::SmallVector<Value *, 2> perDir;
    for (int64_t d = 0; d < s.dirs; ++d) {
      llvm::SmallVector<Value *, 16> steps;
      for (int64_t t = 0; t < s.seq; ++t)
        steps.push_back(
            u.unsqueeze(ys[d][t], {0, 1}, "Y/" + llvm::Twine(d) + "/" + llvm::Twine(t)));
      perDir.push_back(u.concat(steps, 0, "Y/" + llvm::Twine(d)));
    }
    ctx.bindValue(0, u.concat(perDir, 1, "Y"));
  } else {
    ctx.drop(0, "output Y is not computed: nothing reads it");
  }
  auto finalState = [&](unsigned out, llvm::ArrayRef<Value *> last, llvm::StringRef leaf) {
    if (!wanted(out)) {
      ctx.drop(out, "output " + leaf.str() + " is not computed: nothing reads it");
      return;
    }
    llvm::SmallVector<Value *, 2> parts;
    for (size_t d = 0; d < last.size(); ++d)
      parts.push_back(u.unsqueeze(last[d], {0}, leaf + "/" + llvm::Twine(d)));
    ctx.bindValue(out, u.concat(parts, 0, leaf));
  };
  finalState(1, lastH, "Y_h");
  if (cell == Cell::LSTM)
    finalState(2, lastC, "Y_c");
  return u.finish();
}

llvm::Error importLSTM(NodeContext &ctx) {
  return importRecurrent(ctx, Cell::LSTM);
}

llvm::Error importGRU(NodeContext &ctx) {
  return importRecurrent(ctx, Cell::GRU);
}

const OpRule kRules[] = {
    {"LSTM", importLSTM},
    {"GRU", importGRU},
};

} // namespace

llvm::ArrayRef<OpRule> recurrentRules() {
  return kRules;
}

} // namespace graphc::onnxfe
