//===- NodeContext.cpp - One ONNX node seen by its import function ---------===//
//
// Inputs come as graph values (constants and variable reads are created on
// first use, just before their first reader), as import-time constants, or
// as types; attributes with ONNX defaults; results are created through
// emit(), which names the node after the ONNX node and lets the shape
// function check it, so shape errors name this node and its operands'
// producers.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"

#include "ir/Diagnostics.h"
#include "ir/ShapeInference.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace graphc::onnxfe {

int64_t NodeContext::opset() const {
  return imp_.opset();
}

std::string NodeContext::describe() const {
  if (node_.domain().empty() || node_.domain() == "ai.onnx")
    return "node '" + name_ + "' (" + node_.op_type() + ", opset " + std::to_string(opset()) + ")";
  int64_t version = imp_.domainOpset(node_.domain());
  return "node '" + name_ + "' (" + node_.domain() + "." + node_.op_type() + ", " + node_.domain() +
         " opset " + (version ? std::to_string(version) : "unknown") + ")";
}

llvm::Error NodeContext::fail(const llvm::Twine &msg) const {
  return makeError(describe() + ": " + msg);
}

const char *const kBindBatchHint = "; give --batch N to import the model with a bound batch";

llvm::Error NodeContext::failNeedsBatch(const llvm::Twine &msg) const {
  imp_.needBatch();
  return fail(msg + kBindBatchHint);
}

//===-- Inputs -------------------------------------------------------------===//

unsigned NodeContext::numInputs() const {
  unsigned n = node_.input_size();
  while (n && node_.input(n - 1).empty())
    --n;
  return n;
}

llvm::Expected<Value *> NodeContext::input(unsigned i) {
  if (!hasInput(i))
    return fail("needs input " + llvm::Twine(i));
  return imp_.materialize(node_.input(i), describe());
}

llvm::Expected<TensorType> NodeContext::inputType(unsigned i) const {
  if (!hasInput(i))
    return fail("needs input " + llvm::Twine(i));
  return imp_.typeOf(node_.input(i), describe());
}

const Known *NodeContext::known(unsigned i) const {
  if (!hasInput(i))
    return nullptr;
  const Slot *s = imp_.slot(node_.input(i));
  return s && s->knownAtImport() && !s->known->foreignType ? s->known.get() : nullptr;
}

static int64_t intAt(const Tensor &t, int64_t i) {
  switch (t.dtype()) {
  case DType::I64:
    return t.data<int64_t>()[i];
  case DType::I32:
    return t.data<int32_t>()[i];
  case DType::Bool:
    return t.data<uint8_t>()[i];
  default:
    return (int64_t)t.at(i);
  }
}

llvm::Expected<Ints> NodeContext::constInts(unsigned i, llvm::StringRef what) const {
  if (!hasInput(i))
    return fail("needs " + what + " (input " + llvm::Twine(i) + ")");
  const Known *k = known(i);
  const Slot *s = imp_.slot(node_.input(i));
  if (!k) {
    std::string source = !s                                                    ? ""
                         : s->value && s->value->producer()->op() == Op::Input ? ", a graph input"
                         : !s->variable.empty()                                ? ", a variable"
                         : !s->producer.empty() ? ", computed by node '" + s->producer + "'"
                                                : "";
    return fail(what + " (input '" + node_.input(i) +
                "') must be known at import time, but it is a runtime value" + source);
  }
  if (k->hasBatch())
    return failNeedsBatch(what + " (input '" + node_.input(i) +
                          "') depends on the symbolic batch size here");
  if (isFloat(k->data.dtype()) || k->data.type().rank() > 1)
    return fail(what + " (input '" + node_.input(i) + "') must be a list of integers, not " +
                toString(k->data.type()));
  Ints out;
  for (int64_t j = 0; j < k->data.numElements(); ++j)
    out.push_back(intAt(k->data, j));
  return out;
}

llvm::Expected<double> NodeContext::constScalar(unsigned i, llvm::StringRef what) const {
  const Known *k = known(i);
  if (!k)
    return fail(what + " (input '" + (hasInput(i) ? node_.input(i) : std::string()) +
                "') must be a constant known at import time");
  if (k->data.numElements() != 1 || k->hasBatch())
    return fail(what + " (input '" + node_.input(i) + "') must be a single number, not " +
                toString(k->data.type()));
  if (k->data.dtype() == DType::F32)
    return shortestDecimal(k->data.data<float>()[0]);
  return isFloat(k->data.dtype()) ? k->data.at(0) : (double)intAt(k->data, 0);
}

//===-- Attributes ---------------------------------------------------------===//

const onnx::AttributeProto *NodeContext::attr(llvm::StringRef name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::getInt(llvm::StringRef name, int64_t dflt) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return dflt;
  return a->type() == onnx::AttributeProto::FLOAT ? (int64_t)a->f() : a->i();
}

double shortestDecimal(float f) {
  if (!std::isfinite(f))
    return f;
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    snprintf(buf, sizeof(buf), "%.*g", precision, (double)f);
    double d = std::strtod(buf, nullptr);
    if ((float)d == f)
      return d;
  }
  return f;
}

double NodeContext::getFloat(llvm::StringRef name, double dflt) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return dflt;
  return a->type() == onnx::AttributeProto::INT ? (double)a->i() : shortestDecimal(a->f());
}

std::string NodeContext::getString(llvm::StringRef name, llvm::StringRef dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<Ints> NodeContext::getInts(llvm::StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return Ints(a->ints().begin(), a->ints().end());
}

llvm::Expected<std::optional<Ints>> NodeContext::intsFromAttrOrInput(llvm::StringRef name,
                                                                     unsigned input) const {
  if (auto v = getInts(name))
    return v;
  if (!hasInput(input))
    return std::nullopt;
  auto v = constInts(input, name);
  if (!v)
    return v.takeError();
  return std::optional<Ints>(std::move(*v));
}

//===-- Results ------------------------------------------------------------===//

llvm::Expected<Node *> NodeContext::emit(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs) {
  Graph &g = imp_.graph();
  // A node may take the name of a graph output it produces itself.
  llvm::StringRef mayUse;
  for (const std::string &out : node_.output())
    if (out == name_ && imp_.isGraphOutput(out))
      mayUse = out;
  std::string nodeName = imp_.uniqueName(name_, mayUse);

  int fixed = opInfo(op).numOutputs;
  size_t count = fixed >= 0 ? (size_t)fixed : attrs.getInts("split").size();
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    // Graph outputs keep their ONNX names, so users find them by those.
    bool output = i < (size_t)node_.output_size() && imp_.isGraphOutput(node_.output(i));
    std::string want = output       ? node_.output(i)
                       : count == 1 ? nodeName
                                    : nodeName + ":" + std::to_string(i);
    auto isFree = [&](const std::string &n) {
      if (llvm::is_contained(names, n) || (n == nodeName && count != 1))
        return false;
      return n == nodeName || imp_.uniqueName(n, output ? want : "") == n;
    };
    std::string name = want;
    for (unsigned k = 1; !isFree(name); ++k)
      name = want + "_" + std::to_string(k);
    names.push_back(name);
  }
  auto n = createInferredNode(g, op, operands, names, std::move(attrs), nodeName);
  if (!n)
    return n.takeError();
  for (size_t i = 0; i < count && i < (size_t)node_.output_size(); ++i)
    bindValue(i, (*n)->result(i));
  return *n;
}

void NodeContext::bindValue(unsigned out, Value *v) {
  if (out >= (unsigned)node_.output_size() || node_.output(out).empty())
    return;
  Slot &s = *imp_.slotFor(node_.output(out));
  s = Slot();
  s.value = v;
  s.producer = name_;
}

void NodeContext::bindKnown(unsigned out, Known k) {
  if (out >= (unsigned)node_.output_size() || node_.output(out).empty())
    return;
  Slot &s = *imp_.slotFor(node_.output(out));
  s = Slot();
  s.known = std::make_shared<Known>(std::move(k));
  s.foldable = true;
  s.origin = name_;
  s.producer = name_;
}

void NodeContext::bindVariable(unsigned out, llvm::StringRef var) {
  if (out >= (unsigned)node_.output_size() || node_.output(out).empty())
    return;
  Slot &s = *imp_.slotFor(node_.output(out));
  s = Slot();
  s.variable = var.str();
  s.origin = var.str();
  s.producer = name_;
}

void NodeContext::drop(unsigned out, llvm::StringRef why) {
  if (out >= (unsigned)node_.output_size() || node_.output(out).empty())
    return;
  Slot &s = *imp_.slotFor(node_.output(out));
  s = Slot();
  s.dropped = why.str();
  s.producer = name_;
}

llvm::Expected<int64_t> normalizeAxis(const NodeContext &ctx, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return ctx.fail("axis " + llvm::Twine(axis) + " is out of range for rank " + llvm::Twine(rank));
  return a;
}

} // namespace graphc::onnxfe
