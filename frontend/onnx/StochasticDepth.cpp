//===- StochasticDepth.cpp - Random ops as per-sample Dropout -------------===//
//
// PyTorch exports stochastic depth (torchvision.ops.stochastic_depth, timm's
// drop_path) as a random draw turned into a 0/1 noise, scaled by 1/keep and
// multiplied into the residual branch x:
//
//   Less form   x * Cast(RandomUniform[Like](S) < keep) / keep
//   Floor form  x * Floor(keep + RandomUniform[Like](S)) / keep
//   Bernoulli   x * [Cast] Bernoulli(P) / keep              (P all keep)
//
// with S (or P) of shape [N,1,...,1] (one draw per sample: torchvision's
// mode "row", timm) or [1,...,1] (one for the whole tensor: mode "batch").
// PyTorch 2's dynamo exporter writes nn.Dropout in training mode the same
// way, with S of x's own shape: one draw per element, an ordinary Dropout.
// PyTorch's exports give S as ConstantOfShape or Expand of a shape holding
// the batch, or as a slice of x (rand_like(x[:, :1, :1, :1])); PyTorch 1.13
// writes torch.bernoulli(P) as RandomUniformLike(P) < P.
//
// Such a chain is exactly inverted dropout with one mask value per sample
// (or per tensor), so the Mul imports as Dropout {ratio = 1 - keep,
// training = 1, mask = sample | tensor} of x (ir/DropoutMask.h) and the
// rest of the chain is not imported: the training pass, the kernels' mask
// streams, recomputation, towers and the inference export then treat it as
// any Dropout.
//
// Stages: findStochasticDepth matches the chains on the ONNX graph before
// anything is imported (structure only: op types, single readers), so that
// checkOps lets the random ops of a chain through and refuses every other
// random op with the reason; importStochasticDepth, when the walk reaches
// the Mul, reads what is known by then (keep, the noise's shape) and checks
// that the chain is inverted dropout on a shape it supports.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"
#include "frontend/onnx/OnnxTensor.h"

#include "ir/AttributeText.h"
#include "ir/Diagnostics.h"
#include "ir/DropoutMask.h"

#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace graphc::onnxfe {

const char *const kStochasticDepthForms =
    "graphc imports random ops only as stochastic depth, x * noise with noise "
    "Cast(RandomUniform[Like] < keep) / keep, Floor(keep + RandomUniform[Like]) / keep or "
    "Bernoulli(keep) / keep, drawn once per sample ([N,1,...,1]), once for the whole tensor "
    "([1,...,1]) or once per element (x's shape: dropout)";

bool isRandomOp(llvm::StringRef opType) {
  return opType == "RandomUniform" || opType == "RandomUniformLike" || opType == "RandomNormal" ||
         opType == "RandomNormalLike" || opType == "Bernoulli" || opType == "Multinomial";
}

namespace {

struct Reader {
  const onnx::NodeProto *node;
  unsigned slot;
};

/// Who reads which ONNX value, and who produces it.
class Readers {
public:
  Readers(const onnx::GraphProto &g, llvm::ArrayRef<const onnx::NodeProto *> order,
          const Producers &producers)
      : producers_(producers) {
    for (const auto &o : g.output())
      outputs_.insert(o.name());
    for (const onnx::NodeProto *n : order) {
      for (int i = 0; i < n->input_size(); ++i)
        if (!n->input(i).empty())
          readers_[n->input(i)].push_back({n, (unsigned)i});
    }
  }

  llvm::ArrayRef<Reader> of(llvm::StringRef value) const {
    auto it = readers_.find(value);
    return it == readers_.end() ? llvm::ArrayRef<Reader>() : llvm::ArrayRef<Reader>(it->second);
  }
  const onnx::NodeProto *producer(llvm::StringRef value) const { return producers_.lookup(value); }
  bool isGraphOutput(llvm::StringRef value) const { return outputs_.contains(value); }

  /// The one node reading `n`'s only output, or why there is none.
  llvm::Expected<Reader> onlyReader(const onnx::NodeProto &n) const {
    if (n.output_size() != 1)
      return makeError(n.op_type() + " '" + scopeName(n) + "' has " + llvm::Twine(n.output_size()) +
                       " outputs");
    const std::string &out = n.output(0);
    if (isGraphOutput(out))
      return makeError("the result of " + n.op_type() + " '" + scopeName(n) +
                       "' is a graph output");
    llvm::ArrayRef<Reader> rs = of(out);
    if (rs.size() != 1)
      return makeError("the result of " + n.op_type() + " '" + scopeName(n) + "' is read by " +
                       llvm::Twine(rs.size()) + " nodes, not one");
    return rs[0];
  }

private:
  llvm::StringMap<std::vector<Reader>> readers_;
  const Producers &producers_;
  llvm::StringSet<> outputs_;
};

std::string describeReader(const Reader &r) {
  return r.node->op_type() + " '" + scopeName(*r.node) + "' (input " + std::to_string(r.slot) + ")";
}

float floatAttr(const onnx::NodeProto &n, llvm::StringRef name, float dflt) {
  for (const auto &a : n.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto::FLOAT)
      return a.f();
  return dflt;
}

/// The chain from random op `r` to its Mul, or why `r` starts none.
llvm::Expected<StochasticDepth> matchChain(const onnx::NodeProto &r, const Readers &readers) {
  StochasticDepth sd;
  sd.random = &r;
  llvm::StringRef op = r.op_type();
  bool uniform = op == "RandomUniform" || op == "RandomUniformLike";
  if (!uniform && op != "Bernoulli")
    return makeError("it draws from another distribution than uniform [0, 1) or Bernoulli");
  if (uniform && (floatAttr(r, "low", 0) != 0 || floatAttr(r, "high", 1) != 1))
    return makeError("it draws from [" + formatDouble(floatAttr(r, "low", 0)) + ", " +
                     formatDouble(floatAttr(r, "high", 1)) + "), not [0, 1)");

  auto next = readers.onlyReader(r);
  if (!next)
    return next.takeError();
  auto follow = [&](const onnx::NodeProto &n) -> llvm::Expected<Reader> {
    return readers.onlyReader(n);
  };
  auto unexpected = [&](const Reader &at, llvm::StringRef wanted) {
    return makeError("its noise reaches " + describeReader(at) + " where " + wanted +
                     " should follow");
  };
  if (uniform) {
    if (next->node->op_type() == "Less" && next->slot == 0) {
      sd.form = NoiseForm::Less;
      sd.keepOp = next->node;
      next = follow(*next->node);
      if (!next)
        return next.takeError();
      if (next->node->op_type() != "Cast")
        return unexpected(*next, "a Cast of the comparison");
      sd.parts.push_back(next->node);
      next = follow(*next->node);
    } else if (next->node->op_type() == "Add") {
      sd.form = NoiseForm::Floor;
      sd.keepOp = next->node;
      next = follow(*next->node);
      if (!next)
        return next.takeError();
      if (next->node->op_type() != "Floor")
        return unexpected(*next, "Floor");
      sd.parts.push_back(next->node);
      next = follow(*next->node);
    } else {
      return unexpected(*next, "Less (draw < keep) or Add (keep + draw)");
    }
  } else {
    sd.form = NoiseForm::Bernoulli;
    if (next->node->op_type() == "Cast") {
      sd.parts.push_back(next->node);
      next = follow(*next->node);
    }
  }
  if (!next)
    return next.takeError();
  if (next->node->op_type() != "Div" || next->slot != 0)
    return unexpected(*next, "Div (noise / keep)");
  sd.div = next->node;
  next = follow(*next->node);
  if (!next)
    return next.takeError();
  if (next->node->op_type() != "Mul")
    return unexpected(*next, "Mul (x * noise)");
  sd.mul = next->node;
  sd.xSlot = 1 - next->slot;
  if (sd.mul->input_size() != 2)
    return makeError("Mul '" + scopeName(*sd.mul) + "' does not have two inputs");

  // The tensor the draw takes its shape (and Bernoulli its probability)
  // from, if a ConstantOfShape or Expand: part of the chain when only chains
  // read it (findStochasticDepth decides).
  if (op != "RandomUniform" && r.input_size() > 0)
    if (const onnx::NodeProto *s = readers.producer(r.input(0)))
      if ((s->op_type() == "ConstantOfShape" || s->op_type() == "Expand") &&
          s->output_size() == 1 && !readers.isGraphOutput(s->output(0)))
        sd.source = s;
  return sd;
}

} // namespace

StochasticDepthScan findStochasticDepth(const onnx::GraphProto &g,
                                        llvm::ArrayRef<const onnx::NodeProto *> order,
                                        const Producers &producers) {
  StochasticDepthScan scan;
  Readers readers(g, order, producers);
  for (const onnx::NodeProto *n : order) {
    if (!(n->domain().empty() || n->domain() == "ai.onnx") || !isRandomOp(n->op_type()))
      continue;
    auto sd = matchChain(*n, readers);
    if (!sd) {
      scan.refused[n] = llvm::toString(sd.takeError());
      continue;
    }
    scan.patterns.push_back(*sd);
  }
  // A shape source read by anything but the chains' draws and keep ops is
  // imported as itself; PyTorch 2's dynamo exporter shares one Expand among
  // the draws of every block, which then goes with them.
  llvm::DenseSet<const onnx::NodeProto *> drawing;
  for (const StochasticDepth &sd : scan.patterns) {
    drawing.insert(sd.random);
    drawing.insert(sd.keepOp);
  }
  for (StochasticDepth &sd : scan.patterns)
    if (sd.source && !llvm::all_of(readers.of(sd.source->output(0)), [&](const Reader &u) {
          return drawing.contains(u.node);
        }))
      sd.source = nullptr;
  for (unsigned index = 0; index < scan.patterns.size(); ++index) {
    const StochasticDepth &sd = scan.patterns[index];
    for (const onnx::NodeProto *part : {sd.source, sd.random, sd.keepOp, sd.div})
      if (part)
        scan.absorbed[part] = index;
    for (const onnx::NodeProto *part : sd.parts)
      scan.absorbed[part] = index;
    scan.muls[sd.mul] = index;
  }
  return scan;
}

//===-- The Mul ------------------------------------------------------------===//

namespace {

/// The one number every element of a known value holds (PyTorch's Python
/// floats may come as DOUBLE constants), or null.
std::optional<double> uniformValue(const Importer &imp, llvm::StringRef name) {
  const Slot *s = imp.slot(name);
  if (!s || s->value || !s->known || s->known->hasBatch())
    return std::nullopt;
  const Known &k = *s->known;
  int64_t n = k.data.numElements();
  if (n == 0)
    return std::nullopt;
  auto at = [&](int64_t i) {
    if (k.foreignType)
      return k.foreign[i];
    return k.data.dtype() == DType::F32 ? shortestDecimal(k.data.data<float>()[i]) : k.data.at(i);
  };
  double v = at(0);
  for (int64_t i = 1; i < n; ++i)
    if (at(i) != v)
      return std::nullopt;
  return v;
}

/// ConstantOfShape's one-element `value`.
llvm::Expected<double> constantOfShapeValue(const onnx::TensorProto &t) {
  const char *what = "ConstantOfShape's attribute 'value'";
  if (!fromOnnxDType(t.data_type())) {
    auto v = foreignValues(t, what);
    if (!v)
      return v.takeError();
    if (v->size() == 1)
      return (*v)[0];
  } else {
    auto v = fromOnnxTensor(t, what);
    if (!v)
      return v.takeError();
    if (v->numElements() == 1)
      return v->dtype() == DType::F32 ? shortestDecimal(v->data<float>()[0]) : v->at(0);
  }
  return makeError(llvm::Twine(what) + " does not hold one number");
}

class ChainReader {
public:
  ChainReader(NodeContext &mul, const StochasticDepth &sd)
      : imp_(mul.importer()), sd_(sd), random_(mul.importer(), *sd.random, scopeName(*sd.random)) {}

  /// Errors name the random op, where the user's chain starts.
  llvm::Error fail(const llvm::Twine &msg) const { return random_.fail(msg); }

  /// The number held by `name`: a known constant, or the chain's
  /// ConstantOfShape / Expand.
  llvm::Expected<double> keepIn(llvm::StringRef name, llvm::StringRef what) const {
    if (sd_.source && name == sd_.source->output(0)) {
      if (sd_.source->op_type() == "Expand")
        return keepIn(sd_.source->input(0), what);
      for (const auto &a : sd_.source->attribute())
        if (a.name() == "value")
          return constantOfShapeValue(a.t());
      return 0.0; // ConstantOfShape's default value
    }
    if (auto v = uniformValue(imp_, name))
      return *v;
    return fail("stochastic depth's " + what + " '" + name +
                "' is not a constant known at import time");
  }

  /// The noise's shape, kBatchDim where it is the symbolic batch.
  llvm::Expected<Dims> noiseShape() const {
    const onnx::NodeProto &r = *sd_.random;
    if (r.op_type() == "RandomUniform") {
      for (const auto &a : r.attribute())
        if (a.name() == "shape")
          return Dims(a.ints().begin(), a.ints().end());
      return fail("stochastic depth draws without a shape attribute");
    }
    if (sd_.source) {
      llvm::StringRef shapeName = sd_.source->input(sd_.source->op_type() == "Expand" ? 1 : 0);
      const Slot *s = imp_.slot(shapeName);
      if (!s || s->value || !s->known)
        return fail("stochastic depth takes its shape from '" + shapeName +
                    "', which is not known at import time");
      const Known &k = *s->known;
      Dims shape;
      for (int64_t i = 0; i < k.data.numElements(); ++i)
        shape.push_back(k.isBatch(i) ? kBatchDim : (int64_t)k.data.at(i));
      return shape;
    }
    auto t = imp_.typeOf(r.input(0), random_.describe());
    if (!t)
      return t.takeError();
    return t->shape;
  }

private:
  const Importer &imp_;
  const StochasticDepth &sd_;
  NodeContext random_;
};

/// 1 - keep to 12 decimals: 1 - 0.8 is 0.19999999999999996 in doubles, and
/// the ratio reads as the model's author wrote it (keep, a float32, has fewer
/// decimals; ratio * 2^32, the dropout threshold, moves by less than 0.01).
double dropRatio(double keep) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.12f", 1.0 - keep);
  return std::strtod(buf, nullptr);
}

} // namespace

llvm::Error importStochasticDepth(NodeContext &ctx, const StochasticDepth &sd) {
  ChainReader chain(ctx, sd);
  // The probability of keeping a sample, as the comparison, the sum or the
  // Bernoulli draw has it, and what the noise is divided by.
  const onnx::NodeProto &r = *sd.random;
  auto keepOf = [&]() -> llvm::Expected<double> {
    switch (sd.form) {
    case NoiseForm::Less:
      return chain.keepIn(sd.keepOp->input(1), "the keep probability");
    case NoiseForm::Floor:
      return chain.keepIn(sd.keepOp->input(sd.keepOp->input(0) == r.output(0) ? 1 : 0),
                          "the keep probability");
    case NoiseForm::Bernoulli:
      break;
    }
    return chain.keepIn(r.input(0), "the probability");
  };
  auto keep = keepOf();
  if (!keep)
    return keep.takeError();
  auto divisor = chain.keepIn(sd.div->input(1), "the divisor");
  if (!divisor)
    return divisor.takeError();
  if (!(*keep > 0 && *keep <= 1))
    return chain.fail("stochastic depth keeps a sample with probability " + formatDouble(*keep) +
                      ", outside (0, 1]");
  if (std::fabs(*divisor - *keep) > 1e-6 * *keep)
    return chain.fail("stochastic depth divides by " + formatDouble(*divisor) +
                      ", not by the keep probability " + formatDouble(*keep) +
                      "; graphc imports only the scaled form (x * mask / keep)");

  auto x = ctx.input(sd.xSlot);
  if (!x)
    return x.takeError();
  auto shape = chain.noiseShape();
  if (!shape)
    return shape.takeError();
  llvm::ArrayRef<int64_t> xs = (*x)->type().shape;
  bool ones =
      shape->size() == xs.size() && !xs.empty() &&
      llvm::all_of(llvm::ArrayRef<int64_t>(*shape).drop_front(), [](int64_t d) { return d == 1; });
  // A noise of the batch's size (or its symbol) varies per sample; a batch
  // of one makes [1,...] per sample too (the same draw at that batch, and
  // PyTorch's row mode when the model is rebatched).
  std::optional<DropoutMask> mask;
  if (llvm::ArrayRef<int64_t>(*shape) == xs)
    mask = DropoutMask::Element;
  else if (ones && ((*shape)[0] == xs[0] || ((*shape)[0] == kBatchDim && xs[0] == kBatchDim)))
    mask = DropoutMask::Sample;
  else if (ones && (*shape)[0] == 1)
    mask = DropoutMask::Tensor;
  if (!mask)
    return chain.fail("stochastic depth draws a noise of shape " + shapeToString(*shape) +
                      " for x '" + ctx.inputName(sd.xSlot) + "' " + toString((*x)->type()) + "; " +
                      kStochasticDepthForms);
  Attrs a;
  a.set("ratio", dropRatio(*keep));
  a.set("training", (int64_t)1);
  if (*mask != DropoutMask::Element)
    a.set("mask", dropoutMaskName(*mask).str());
  auto n = ctx.emit(Op::Dropout, {*x}, std::move(a));
  return n ? llvm::Error::success() : n.takeError();
}

} // namespace graphc::onnxfe
