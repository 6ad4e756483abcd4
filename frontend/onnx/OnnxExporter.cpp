//===- OnnxExporter.cpp - Graph "main" as an ONNX model (opset 17 or 20) ---===//
//
// The inverse of the importer's mapping (docs/onnx-frontend.md): each of our
// nodes becomes one ONNX node with the same name, attributes that ONNX takes
// as inputs at the written opset become Constant nodes, variables read by the graph
// become initializers (in module order), the batch symbol N becomes the
// dim_param "N", and integer module meta (a bound batch, a seed) is recorded
// as metadata "graphc.<key>". The form (OnnxExporter.h) decides BatchNorm's
// training_mode and whether Dropout is written at all; the model's doc_string
// says which form it is.
// The opset is 17, or 20 where the graph has a Gelu and the model it was
// imported from had opset 20 or later (PlanInfo::onnxOpset): opset 20 has
// Gelu as one op; at 17 it is written as PyTorch 1.13 exports it, in ONNX
// ops (0.5·x·(1 + erf(x/√2)), or the tanh form), which import back op by op.
// Value names stay ours where they are free; an intermediate value whose name
// an initializer or graph input already holds gets a fresh one (the importer
// names values after nodes, so this does not change what comes back).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxExporter.h"
#include "frontend/onnx/OnnxTensor.h"

#include "ir/Diagnostics.h"
#include "ir/DropoutMask.h"
#include "ir/Initializers.h"
#include "ir/OutputFile.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

#include <climits>
#include <cmath>

namespace graphc {
namespace {

using onnxfe::toOnnxDType;
using onnxfe::toOnnxTensor;

constexpr int64_t kExportOpset = 17;
/// The first opset with Gelu (and the last form this exporter writes).
constexpr int64_t kGeluOpset = 20;
constexpr int64_t kExportIrVersion = 8;

void setType(onnx::ValueInfoProto &vi, const TensorType &t) {
  auto *tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(toOnnxDType(t.dtype));
  auto *shape = tt->mutable_shape();
  for (int64_t d : t.shape) {
    auto *dim = shape->add_dim();
    if (d == kBatchDim)
      dim->set_dim_param("N");
    else
      dim->set_dim_value(d);
  }
}

void addInt(onnx::NodeProto &n, llvm::StringRef name, int64_t v) {
  auto *a = n.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void addFloat(onnx::NodeProto &n, llvm::StringRef name, double v) {
  auto *a = n.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f((float)v);
}

void addInts(onnx::NodeProto &n, llvm::StringRef name, llvm::ArrayRef<int64_t> v) {
  auto *a = n.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a->add_ints(x);
}

void addString(onnx::NodeProto &n, llvm::StringRef name, llvm::StringRef v) {
  auto *a = n.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v.str());
}

Tensor scalarOf(DType t, double v) {
  Tensor s{TensorType(t, {})};
  s.set(0, v);
  return s;
}

class Exporter {
public:
  Exporter(const Module &m, uint64_t seed, ExportForm form) : m_(m), seed_(seed), form_(form) {}

  /// The opset to write: 20 only where a Gelu needs it and the model's own
  /// opset allows it, so that every other model keeps the form it had.
  static int64_t opsetFor(const Module &m, const Graph &g) {
    bool gelu = llvm::any_of(g.nodes(), [](const Node *n) { return n->op() == Op::Gelu; });
    return gelu && m.plan().onnxOpset.value_or(0) >= kGeluOpset ? kGeluOpset : kExportOpset;
  }

  llvm::Expected<std::string> run() {
    const Graph *g = m_.findGraph("main");
    if (!g)
      return makeError("cannot export module '" + m_.name() + "': it has no graph 'main'");
    model_.set_ir_version(kExportIrVersion);
    model_.set_producer_name("graphc");
    model_.set_doc_string(form_ == ExportForm::Inference
                              ? "inference form: BatchNorm uses the running statistics, Dropout "
                                "is removed (graphrun export --training-graph writes the "
                                "training form)"
                              : "training form: BatchNorm and Dropout in training mode, for "
                                "training again (graphc import)");
    opset_ = opsetFor(m_, *g);
    auto *opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(opset_);
    // Integer facts (batch, seed, ...) come back through the importer.
    const Attrs facts = m_.plan().integerFacts();
    for (const auto &[key, value] : facts.entries()) {
      auto *p = model_.add_metadata_props();
      p->set_key("graphc." + key);
      p->set_value(std::to_string(std::get<int64_t>(value)));
    }
    graph_ = model_.mutable_graph();
    graph_->set_name(m_.name());

    if (auto e = addInitializers(*g))
      return e;
    for (const Node *n : g->nodes())
      nodeNames_.insert(n->name());
    for (const Node *n : g->nodes())
      if (auto e = exportNode(*n))
        return e;
    for (const Value *v : g->outputs()) {
      auto *vi = graph_->add_output();
      vi->set_name(names_.lookup(v));
      setType(*vi, v->type());
    }
    std::string bytes;
    if (model_.ByteSizeLong() > (size_t)INT_MAX)
      return makeError("cannot export module '" + m_.name() +
                       "': the model is larger than 2 GiB, which protobuf cannot write");
    if (!model_.SerializeToString(&bytes))
      return makeError("cannot export module '" + m_.name() + "': serialization failed");
    return bytes;
  }

private:
  /// Variables read by the graph, in module order.
  llvm::Error addInitializers(const Graph &g) {
    llvm::StringSet<> read;
    for (const Node *n : g.nodes())
      if (n->op() == Op::Variable)
        read.insert(n->attrs().getString("var"));
    for (const Variable &v : m_.variables()) {
      if (!read.contains(v.name))
        continue;
      auto data = initialValue(v, seed_);
      if (!data)
        return withContext(data.takeError(), "cannot export variable '" + v.name + "'");
      onnx::TensorProto *t = graph_->add_initializer();
      t->set_name(v.name);
      toOnnxTensor(*data, *t);
      taken_.insert(v.name);
    }
    return llvm::Error::success();
  }

  /// `base` if no ONNX value holds it yet, else base_1, base_2, ...
  std::string fresh(const std::string &base) {
    std::string name = base;
    for (unsigned i = 1; taken_.contains(name); ++i)
      name = base + "_" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

  std::string freshNode(const std::string &base) {
    std::string name = base;
    for (unsigned i = 1; nodeNames_.contains(name); ++i)
      name = base + "_" + std::to_string(i);
    nodeNames_.insert(name);
    return name;
  }

  /// A Constant node holding `t`; returns the name of its output.
  std::string constant(const Node &user, llvm::StringRef leaf, const Tensor &t) {
    std::string name = freshNode(user.name() + "/" + leaf.str());
    std::string out = fresh(name);
    onnx::NodeProto *c = graph_->add_node();
    c->set_name(name);
    c->set_op_type("Constant");
    c->add_output(out);
    auto *a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    toOnnxTensor(t, *a->mutable_t());
    return out;
  }

  std::string ints(const Node &user, llvm::StringRef leaf, llvm::ArrayRef<int64_t> v) {
    return constant(user, leaf, Tensor::fromInts({(int64_t)v.size()}, v));
  }

  /// The ONNX node for `n`, its operands and results wired.
  onnx::NodeProto &node(const Node &n, llvm::StringRef opType) {
    onnx::NodeProto *p = graph_->add_node();
    p->set_name(n.name());
    p->set_op_type(opType.str());
    for (const Value *v : n.operands())
      p->add_input(names_.lookup(v));
    for (const auto &r : n.results()) {
      std::string name = fresh(r->name());
      names_[r.get()] = name;
      p->add_output(name);
    }
    return *p;
  }

  llvm::Error cannot(const Node &n, const llvm::Twine &why) {
    return makeError("cannot export node '" + n.name() + "' (" + opName(n.op()) + "): " + why);
  }

  /// An extra ONNX node named `leaf` under n's name, reading `inputs`; its
  /// one output is `out`, or a fresh name when `out` is empty. Returns the
  /// output's name.
  std::string extra(const Node &n, llvm::StringRef leaf, llvm::StringRef opType,
                    llvm::ArrayRef<std::string> inputs, std::string out = "") {
    std::string name = freshNode(n.name() + "/" + leaf.str());
    if (out.empty())
      out = fresh(name);
    onnx::NodeProto *p = graph_->add_node();
    p->set_name(name);
    p->set_op_type(opType.str());
    for (const std::string &in : inputs)
      p->add_input(in);
    p->add_output(out);
    return out;
  }

  void exportGeluInOpset17(const Node &n);
  void exportSampleDropout(const Node &n);
  llvm::Error exportNode(const Node &n);

  const Module &m_;
  uint64_t seed_;
  ExportForm form_;
  int64_t opset_ = kExportOpset;
  onnx::ModelProto model_;
  onnx::GraphProto *graph_ = nullptr;
  llvm::DenseMap<const Value *, std::string> names_;
  llvm::StringSet<> taken_, nodeNames_;
};

void Exporter::exportGeluInOpset17(const Node &n) {
  // PyTorch 1.13's forms, so that a model graphc exports reads like one it
  // exported: x·(1 + erf(x / √2))·0.5, or x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))·0.5.
  DType dt = n.operand(0)->type().dtype;
  std::string x = names_.lookup(n.operand(0));
  std::string one = constant(n, "one", scalarOf(dt, 1.0));
  std::string half = constant(n, "half", scalarOf(dt, 0.5));
  std::string curve;
  if (n.attrs().getString("approximate", "none") == "tanh") {
    std::string cubic = constant(n, "cubic", scalarOf(dt, 0.044715));
    std::string beta = constant(n, "sqrt_2_over_pi", scalarOf(dt, 0.79788456080286536));
    std::string sq = extra(n, "Mul", "Mul", {x, x});
    std::string cube = extra(n, "Mul_1", "Mul", {x, sq});
    std::string scaled = extra(n, "Mul_2", "Mul", {cubic, cube});
    std::string inner = extra(n, "Add", "Add", {x, scaled});
    curve = extra(n, "Tanh", "Tanh", {extra(n, "Mul_3", "Mul", {beta, inner})});
  } else {
    std::string sqrt2 = constant(n, "sqrt_2", scalarOf(dt, std::sqrt(2.0)));
    curve = extra(n, "Erf", "Erf", {extra(n, "Div", "Div", {x, sqrt2})});
  }
  std::string plusOne = extra(n, "Add_1", "Add", {curve, one});
  std::string times = extra(n, "Mul_4", "Mul", {x, plusOne});
  // The last node writes the Gelu's own value name.
  std::string out = fresh(n.result()->name());
  names_[n.result()] = out;
  extra(n, "Mul_5", "Mul", {times, half}, out);
}

void Exporter::exportSampleDropout(const Node &n) {
  // ONNX's Dropout masks elements; a per-sample (or per-tensor) mask is
  // written as torchvision's stochastic depth exports, which the importer
  // reads back as this Dropout (StochasticDepth.cpp): the noise's shape
  // [N,1,...] (Shape of x, its first entry, ones) or [1,...], zeros of it, a
  // uniform draw like them, (draw < keep) / keep, and x times that.
  const TensorType &xt = n.operand(0)->type();
  double keep = 1.0 - n.attrs().getFloat("ratio", 0.5);
  std::string x = names_.lookup(n.operand(0));
  std::string shape;
  if (dropoutMaskOf(n) == DropoutMask::Sample) {
    std::string all = extra(n, "Shape", "Shape", {x});
    std::string batch =
        extra(n, "Slice", "Slice", {all, ints(n, "starts", {0}), ints(n, "ends", {1})});
    shape = extra(n, "Concat", "Concat", {batch, ints(n, "ones", Ints(xt.rank() - 1, 1))});
    addInt(*graph_->mutable_node(graph_->node_size() - 1), "axis", 0);
  } else {
    shape = ints(n, "noise_shape", Ints(xt.rank(), 1));
  }
  std::string zeros = extra(n, "ConstantOfShape", "ConstantOfShape", {shape});
  std::string draw = extra(n, "RandomUniformLike", "RandomUniformLike", {zeros});
  addInt(*graph_->mutable_node(graph_->node_size() - 1), "dtype", toOnnxDType(xt.dtype));
  std::string keepName = constant(n, "keep", scalarOf(xt.dtype, keep));
  std::string kept = extra(n, "Less", "Less", {draw, keepName});
  std::string cast = extra(n, "Cast", "Cast", {kept});
  addInt(*graph_->mutable_node(graph_->node_size() - 1), "to", toOnnxDType(xt.dtype));
  std::string noise = extra(n, "Div", "Div", {cast, keepName});
  node(n, "Mul").add_input(noise);
}

llvm::Error Exporter::exportNode(const Node &n) {
  const Attrs &a = n.attrs();
  auto windowAttrs = [&](onnx::NodeProto &p, llvm::ArrayRef<int64_t> kernel) {
    addInts(p, "kernel_shape", kernel);
    addInts(p, "strides", a.getInts("strides", Ints(kernel.size(), 1)));
    addInts(p, "pads", a.getInts("pads", Ints(2 * kernel.size(), 0)));
  };
  // A fusion's attributes (passes/InferenceFusion.h) have no ONNX form here;
  // dropping them would write a model without its ReLUs or residual adds.
  if (a.has("activation") || a.has("sum"))
    return cannot(n, "it carries a fused activation or addend (a compiled graph); export the "
                     "model before it is compiled");
  switch (n.op()) {
  case Op::Input: {
    std::string name = fresh(n.result()->name());
    names_[n.result()] = name;
    auto *vi = graph_->add_input();
    vi->set_name(name);
    setType(*vi, n.result()->type());
    return llvm::Error::success();
  }
  case Op::Variable:
    names_[n.result()] = a.getString("var");
    return llvm::Error::success();
  case Op::Constant: {
    onnx::NodeProto &p = node(n, "Constant");
    auto *attr = p.add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    toOnnxTensor(*a.getTensor("value"), *attr->mutable_t());
    return llvm::Error::success();
  }
  case Op::Identity:
  case Op::Add:
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Relu:
  case Op::Sigmoid:
  case Op::Tanh:
  case Op::Exp:
  case Op::Log:
  case Op::Sqrt:
  case Op::Neg:
  case Op::Erf:
  case Op::HardSwish:
  case Op::Equal:
  case Op::Less:
  case Op::Greater:
  case Op::Not:
  case Op::Where:
  case Op::MatMul:
  case Op::GlobalAveragePool:
    node(n, opName(n.op()));
    return llvm::Error::success();
  case Op::HardSigmoid: {
    onnx::NodeProto &p = node(n, "HardSigmoid");
    addFloat(p, "alpha", a.getFloat("alpha", 0.2));
    addFloat(p, "beta", a.getFloat("beta", 0.5));
    return llvm::Error::success();
  }
  case Op::Gelu:
    if (opset_ < kGeluOpset) {
      exportGeluInOpset17(n);
      return llvm::Error::success();
    }
    if (a.getString("approximate", "none") == "tanh")
      addString(node(n, "Gelu"), "approximate", "tanh");
    else
      node(n, "Gelu");
    return llvm::Error::success();
  case Op::LayerNorm: {
    onnx::NodeProto &p = node(n, "LayerNormalization");
    addInt(p, "axis", a.getInt("axis", -1));
    addFloat(p, "epsilon", a.getFloat("epsilon", 1e-5));
    return llvm::Error::success();
  }
  case Op::AddN:
    node(n, "Sum");
    return llvm::Error::success();
  case Op::LeakyRelu:
    addFloat(node(n, "LeakyRelu"), "alpha", a.getFloat("alpha", 0.01));
    return llvm::Error::success();
  case Op::Clip: {
    DType dt = n.operand(0)->type().dtype;
    double lo = a.getFloat("min", -INFINITY), hi = a.getFloat("max", INFINITY);
    std::string loName = std::isinf(lo) && lo < 0 ? "" : constant(n, "min", scalarOf(dt, lo));
    std::string hiName = std::isinf(hi) && hi > 0 ? "" : constant(n, "max", scalarOf(dt, hi));
    onnx::NodeProto &p = node(n, "Clip");
    if (!hiName.empty() || !loName.empty())
      p.add_input(loName);
    if (!hiName.empty())
      p.add_input(hiName);
    return llvm::Error::success();
  }
  case Op::Cast:
    addInt(node(n, "Cast"), "to", toOnnxDType(a.getDType("to")));
    return llvm::Error::success();
  case Op::Dropout: {
    if (form_ == ExportForm::Inference) {
      // Gone, but a graph output keeps its own name through an Identity
      // (users fetch outputs by name, and an output may not share a name
      // with an input or another output).
      if (llvm::is_contained(n.graph().outputs(), n.result()))
        node(n, "Identity");
      else
        names_[n.result()] = names_.lookup(n.operand(0));
      return llvm::Error::success();
    }
    if (dropoutMaskOf(n) != DropoutMask::Element) {
      exportSampleDropout(n);
      return llvm::Error::success();
    }
    std::string ratio = constant(n, "ratio", scalarOf(DType::F32, a.getFloat("ratio", 0.5)));
    std::string training;
    if (a.getInt("training"))
      training = constant(n, "training_mode", scalarOf(DType::Bool, 1));
    onnx::NodeProto &p = node(n, "Dropout");
    p.add_input(ratio);
    if (!training.empty())
      p.add_input(training);
    return llvm::Error::success();
  }
  case Op::Softmax:
  case Op::LogSoftmax:
    addInt(node(n, opName(n.op())), "axis", a.getInt("axis", -1));
    return llvm::Error::success();
  case Op::Gemm: {
    onnx::NodeProto &p = node(n, "Gemm");
    addFloat(p, "alpha", a.getFloat("alpha", 1.0));
    addFloat(p, "beta", a.getFloat("beta", 1.0));
    addInt(p, "transA", a.getInt("transA"));
    addInt(p, "transB", a.getInt("transB"));
    return llvm::Error::success();
  }
  case Op::Conv: {
    onnx::NodeProto &p = node(n, "Conv");
    llvm::ArrayRef<int64_t> w = n.operand(1)->type().shape;
    windowAttrs(p, w.drop_front(2));
    addInts(p, "dilations", a.getInts("dilations", Ints(w.size() - 2, 1)));
    addInt(p, "group", a.getInt("group", 1));
    return llvm::Error::success();
  }
  case Op::MaxPool:
  case Op::AveragePool: {
    Ints kernel = a.getInts("kernel_shape");
    Ints dilations = a.getInts("dilations", Ints(kernel.size(), 1));
    bool isMax = n.op() == Op::MaxPool;
    bool dilated = !llvm::all_of(dilations, [](int64_t d) { return d == 1; });
    if (!isMax && dilated && opset_ < 19)
      return cannot(n, "AveragePool with dilations needs opset 19; graphc exports opset 17");
    onnx::NodeProto &p = node(n, opName(n.op()));
    windowAttrs(p, kernel);
    addInt(p, "ceil_mode", a.getInt("ceil_mode"));
    if (isMax || dilated)
      addInts(p, "dilations", dilations);
    else
      addInt(p, "count_include_pad", a.getInt("count_include_pad"));
    return llvm::Error::success();
  }
  case Op::BatchNorm: {
    onnx::NodeProto &p = node(n, "BatchNormalization");
    addFloat(p, "epsilon", a.getFloat("epsilon", 1e-5));
    addFloat(p, "momentum", a.getFloat("momentum", 0.9));
    // Training mode has three outputs in ONNX (shape inference insists); the
    // running statistics are unused here, as the importer drops them. The
    // inference form normalises with the running statistics (inputs 3, 4).
    if (form_ == ExportForm::Training && a.getInt("training")) {
      addInt(p, "training_mode", 1);
      p.add_output(fresh(n.name() + "/running_mean"));
      p.add_output(fresh(n.name() + "/running_var"));
    }
    return llvm::Error::success();
  }
  case Op::Reshape: {
    Ints shape = a.getInts("shape");
    if (llvm::count(shape, kBatchDim) > 1)
      return cannot(n, "its shape " + shapeToString(shape) + " holds the batch twice");
    bool zero = llvm::is_contained(shape, 0);
    std::string s = ints(n, "shape", shape);
    onnx::NodeProto &p = node(n, "Reshape");
    p.add_input(s);
    if (zero)
      addInt(p, "allowzero", 1);
    return llvm::Error::success();
  }
  case Op::Expand: {
    Ints shape = a.getInts("shape");
    llvm::ArrayRef<int64_t> in = n.operand(0)->type().shape;
    // N in the target keeps the input's N (shapes align at the right),
    // which ONNX writes as 1.
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] != kBatchDim)
        continue;
      int64_t k = (int64_t)i + (int64_t)in.size() - (int64_t)shape.size();
      if (k < 0 || in[k] != kBatchDim)
        return cannot(n, "it broadcasts to the symbolic batch");
      shape[i] = 1;
    }
    std::string s = ints(n, "shape", shape);
    node(n, "Expand").add_input(s);
    return llvm::Error::success();
  }
  case Op::Flatten:
    addInt(node(n, "Flatten"), "axis", a.getInt("axis", 1));
    return llvm::Error::success();
  case Op::Transpose:
    addInts(node(n, "Transpose"), "perm", a.getInts("perm"));
    return llvm::Error::success();
  case Op::Concat:
    addInt(node(n, "Concat"), "axis", a.getInt("axis"));
    return llvm::Error::success();
  case Op::Split: {
    std::string s = ints(n, "split", a.getInts("split"));
    onnx::NodeProto &p = node(n, "Split");
    p.add_input(s);
    addInt(p, "axis", a.getInt("axis"));
    return llvm::Error::success();
  }
  case Op::Slice: {
    Ints starts = a.getInts("starts");
    Ints axes = a.getInts("axes"), steps = a.getInts("steps");
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i)
        axes.push_back(i);
    if (steps.empty())
      steps.assign(starts.size(), 1);
    std::string s = ints(n, "starts", starts), e = ints(n, "ends", a.getInts("ends"));
    std::string x = ints(n, "axes", axes), st = ints(n, "steps", steps);
    onnx::NodeProto &p = node(n, "Slice");
    for (const std::string *in : {&s, &e, &x, &st})
      p.add_input(*in);
    return llvm::Error::success();
  }
  case Op::Pad: {
    std::string mode = a.getString("mode", "constant");
    std::string pads = ints(n, "pads", a.getInts("pads"));
    std::string value;
    if (mode == "constant")
      value = constant(n, "value", scalarOf(n.operand(0)->type().dtype, a.getFloat("value")));
    onnx::NodeProto &p = node(n, "Pad");
    p.add_input(pads);
    if (!value.empty())
      p.add_input(value);
    addString(p, "mode", mode);
    return llvm::Error::success();
  }
  case Op::Squeeze:
  case Op::Unsqueeze: {
    Ints axes = a.getInts("axes");
    std::string x = axes.empty() ? "" : ints(n, "axes", axes);
    onnx::NodeProto &p = node(n, opName(n.op()));
    if (!x.empty())
      p.add_input(x);
    return llvm::Error::success();
  }
  case Op::Gather:
    addInt(node(n, "Gather"), "axis", a.getInt("axis"));
    return llvm::Error::success();
  case Op::ReduceMean: {
    // Its axes became an input at opset 18, as ReduceSum's did at 13.
    Ints axes = a.getInts("axes");
    bool input = opset_ >= 18;
    std::string x = input && !axes.empty() ? ints(n, "axes", axes) : "";
    onnx::NodeProto &p = node(n, "ReduceMean");
    if (!x.empty())
      p.add_input(x);
    else if (!input && !axes.empty())
      addInts(p, "axes", axes);
    addInt(p, "keepdims", a.getInt("keepdims", 1));
    return llvm::Error::success();
  }
  case Op::ReduceSum: {
    Ints axes = a.getInts("axes");
    std::string x = axes.empty() ? "" : ints(n, "axes", axes);
    onnx::NodeProto &p = node(n, "ReduceSum");
    if (!x.empty())
      p.add_input(x);
    addInt(p, "keepdims", a.getInt("keepdims", 1));
    return llvm::Error::success();
  }
  default:
    return cannot(n, "it is a training-only or multi-device op; export the forward graph, "
                     "before the training and placement passes");
  }
}

} // namespace

llvm::Expected<std::string> exportOnnxBytes(const Module &m, uint64_t seed, ExportForm form) {
  return Exporter(m, seed, form).run();
}

llvm::Error exportOnnxFile(const Module &m, llvm::StringRef path, uint64_t seed, ExportForm form) {
  auto bytes = exportOnnxBytes(m, seed, form);
  if (!bytes)
    return bytes.takeError();
  return writeOutputFile(path, *bytes);
}

} // namespace graphc
