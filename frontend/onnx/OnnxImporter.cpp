//===- OnnxImporter.cpp - The ONNX graph walk ------------------------------===//
//
// Stages: check the model (graph, opset), sort the nodes topologically
// (naming the node of a missing input or a cycle), find the stochastic-depth
// chains (StochasticDepth.cpp: their random ops import, no other does),
// refuse every op that no rule imports in one message (a user learns the
// whole list at once, not one op per attempt), scan how every value is
// used (as runtime data, as an import-time constant, as a batch-norm
// statistic, as a weight), create inputs and variables, import the nodes in
// order (folding what is known at import time, else one op rule each), bind
// the graph outputs and verify. Deterministic: everything follows the order
// of the ONNX file.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/ImportContext.h"
#include "frontend/onnx/OnnxTensor.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/Verifier.h"

#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <cmath>
#include <queue>

namespace graphc {
namespace onnxfe {

/// Opsets of the default domain whose forms this importer knows.
static constexpr int64_t kMinOpset = 7, kMaxOpset = 21;

static bool isDefaultDomain(llvm::StringRef d) {
  return d.empty() || d == "ai.onnx";
}

std::string scopeName(const onnx::NodeProto &node) {
  llvm::StringRef name = llvm::StringRef(node.name()).ltrim('/');
  return name.empty() ? node.op_type() : name.str();
}

Importer::Importer(const onnx::ModelProto &model, const ImportOptions &opts, std::string source,
                   std::string baseDir)
    : model_(model), g_(model.graph()), opts_(opts), source_(std::move(source)),
      baseDir_(std::move(baseDir)) {}

Slot *Importer::slot(llvm::StringRef name) {
  auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : &it->second;
}

const Slot *Importer::slot(llvm::StringRef name) const {
  auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : &it->second;
}

const onnx::NodeProto *Importer::producerOf(llvm::StringRef name) const {
  return producers_.lookup(name);
}

std::string Importer::uniqueName(llvm::StringRef base, llvm::StringRef mayUse) const {
  auto taken = [&](llvm::StringRef n) {
    return graph_->findNode(n) || graph_->findValue(n) || (outputNames_.contains(n) && n != mayUse);
  };
  if (!taken(base))
    return base.str();
  for (unsigned i = 1;; ++i) {
    std::string candidate = (base + "_" + llvm::Twine(i)).str();
    if (!taken(candidate))
      return candidate;
  }
}

int64_t Importer::domainOpset(llvm::StringRef domain) const {
  for (const auto &o : model_.opset_import())
    if (o.domain() == domain)
      return o.version();
  return 0;
}

//===-- Checks and order ---------------------------------------------------===//

static std::string describeNode(const onnx::NodeProto &node, int64_t opset) {
  return "node '" + scopeName(node) + "' (" + node.op_type() + ", opset " + std::to_string(opset) +
         ")";
}

llvm::Error Importer::checkModel() {
  if (!model_.has_graph())
    return makeError(source_ + " is not an ONNX model: it has no graph");
  if (model_.ir_version() <= 0)
    return makeError(source_ + " is not an ONNX model: it has no IR version");
  for (const auto &o : model_.opset_import())
    if (isDefaultDomain(o.domain()))
      opset_ = o.version();
  if (opset_ == 0)
    return makeError(source_ + " imports no opset of the default ONNX domain");
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    return makeError(source_ + " uses opset " + llvm::Twine(opset_) + "; graphc imports opsets " +
                     llvm::Twine(kMinOpset) + " to " + llvm::Twine(kMaxOpset));
  // Nothing to train, evaluate or infer: every command would fail later,
  // each in its own way (onnx.checker refuses it too).
  if (model_.graph().output_size() == 0)
    return makeError(source_ + ": the graph has no outputs; a model computes at least one");
  return llvm::Error::success();
}

llvm::Error Importer::sortNodes() {
  int n = g_.node_size();
  llvm::StringMap<int> producer;
  llvm::StringSet<> available;
  for (const auto &i : g_.input())
    available.insert(i.name());
  for (const auto &t : g_.initializer())
    available.insert(t.name());
  for (int i = 0; i < n; ++i)
    for (const std::string &out : g_.node(i).output()) {
      if (out.empty())
        continue;
      if (available.contains(out) || producer.count(out))
        return makeError(describeNode(g_.node(i), opset_) + ": output '" + out +
                         "' is already defined by a graph input, an initializer or another node");
      producer[out] = i;
      producers_[out] = &g_.node(i);
    }
  std::vector<unsigned> pending(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i)
    for (const std::string &in : g_.node(i).input()) {
      if (in.empty() || available.contains(in))
        continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return makeError(describeNode(g_.node(i), opset_) + ": input '" + in +
                         "' is not a graph input, an initializer or an output of any node");
      users[it->second].push_back(i);
      ++pending[i];
    }
  for (const auto &o : g_.output())
    if (!available.contains(o.name()) && !producer.count(o.name()))
      return makeError("graph output '" + o.name() +
                       "' is not a graph input, an initializer or an output of any node");
  // Kahn's algorithm, smallest file position first: the file's order where valid.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (!pending[i])
      ready.push(i);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order_.push_back(&g_.node(i));
    for (int u : users[i])
      if (--pending[u] == 0)
        ready.push(u);
  }
  if ((int)order_.size() != n)
    for (int i = 0; i < n; ++i)
      if (pending[i])
        return makeError(describeNode(g_.node(i), opset_) +
                         ": the graph has a cycle through this node");
  return llvm::Error::success();
}

llvm::Error Importer::checkOps() {
  // Op types (with their domain) in order of first use, and their nodes.
  std::vector<std::pair<std::string, std::vector<const onnx::NodeProto *>>> missing;
  for (const onnx::NodeProto *node : order_) {
    bool known = isDefaultDomain(node->domain()) &&
                 (findRule(node->op_type()) || alwaysFolded(node->op_type()) ||
                  stochasticDepth_.absorbed.count(node));
    if (known)
      continue;
    std::string type =
        isDefaultDomain(node->domain()) ? node->op_type() : node->domain() + "." + node->op_type();
    auto it = llvm::find_if(missing, [&](const auto &m) { return m.first == type; });
    if (it == missing.end())
      missing.push_back({type, {node}});
    else
      it->second.push_back(node);
  }
  if (missing.empty())
    return llvm::Error::success();
  auto why = [&](const onnx::NodeProto &node) -> std::string {
    return isDefaultDomain(node.domain()) ? ""
                                          : ": graphc imports only ops of the default ONNX domain";
  };
  // A random op outside a stochastic-depth chain: why it is in none.
  auto refused = [&](const onnx::NodeProto &node) -> const std::string * {
    auto it = stochasticDepth_.refused.find(&node);
    return it == stochasticDepth_.refused.end() ? nullptr : &it->second;
  };
  if (missing.size() == 1 && missing[0].second.size() == 1) {
    const onnx::NodeProto &node = *missing[0].second[0];
    NodeContext ctx(*this, node, scopeName(node));
    if (const std::string *r = refused(node))
      return ctx.fail("not part of a stochastic-depth pattern (" + *r + "); " +
                      kStochasticDepthForms);
    return ctx.fail("unsupported op" + why(node));
  }
  std::string list;
  bool anyRandom = false;
  for (const auto &[type, nodes] : missing) {
    list += list.empty() ? "" : "; ";
    list += type + " (node '" + scopeName(*nodes[0]) + "'";
    if (nodes.size() > 1)
      list += " and " + std::to_string(nodes.size() - 1) + " more";
    list += ")";
    anyRandom |= refused(*nodes[0]) != nullptr;
  }
  return makeError(source_ + " uses " + std::to_string(missing.size()) +
                   (missing.size() == 1 ? " op" : " ops") + " that graphc does not import (opset " +
                   std::to_string(opset_) + "): " + list +
                   (anyRandom ? std::string("; ") + kStochasticDepthForms : ""));
}

void Importer::scanUses() {
  for (const onnx::NodeProto *node : order_) {
    const OpRule *rule = isDefaultDomain(node->domain()) ? findRule(node->op_type()) : nullptr;
    unsigned constMask = alwaysFolded(node->op_type()) ? ~0u : rule ? rule->constInputs : 0u;
    // A stochastic-depth chain reads its constants at import time, and its
    // Mul reads only x as data.
    if (stochasticDepth_.absorbed.count(node))
      constMask = ~0u;
    else if (auto sd = stochasticDepth_.muls.find(node); sd != stochasticDepth_.muls.end())
      constMask = 1u << (1 - stochasticDepth_.patterns[sd->second].xSlot);
    bool identity = node->op_type() == "Identity";
    for (int i = 0; i < node->input_size(); ++i) {
      const std::string &in = node->input(i);
      if (in.empty())
        continue;
      uses_[in].push_back({node, (unsigned)i});
      if (!identity && !(i < 32 && (constMask >> i & 1)))
        dataUses_.insert(in);
    }
    if (node->op_type() == "BatchNormalization")
      for (int i = 3; i < std::min(5, node->input_size()); ++i)
        stateNames_.insert(node->input(i));
  }
  for (const auto &o : g_.output())
    dataUses_.insert(o.name());
}

//===-- Inputs and variables -----------------------------------------------===//

std::optional<TensorType> Importer::declaredType(llvm::StringRef name) const {
  if (auto it = initializers_.find(name); it != initializers_.end()) {
    auto t = onnxTensorType(*it->second, "");
    if (!t) {
      llvm::consumeError(t.takeError());
      return std::nullopt;
    }
    return *t;
  }
  auto it = inputs_.find(name);
  if (it == inputs_.end())
    return std::nullopt;
  const auto &tt = it->second->type().tensor_type();
  auto dt = fromOnnxDType(tt.elem_type());
  if (!dt || !tt.has_shape())
    return std::nullopt;
  TensorType t;
  t.dtype = *dt;
  for (const auto &d : tt.shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() <= 0)
      return std::nullopt;
    t.shape.push_back(d.dim_value());
  }
  return t;
}

/// Weight slots of the ops whose weights graph-only models declare as inputs.
static bool isWeightSlot(llvm::StringRef op, unsigned slot) {
  if (op == "Conv" || op == "Gemm")
    return slot == 1 || slot == 2;
  if (op == "BatchNormalization")
    return slot >= 1 && slot <= 4;
  if (op == "LayerNormalization")
    return slot == 1 || slot == 2;
  return op == "MatMul" && slot == 1;
}

static int64_t attrInt(const onnx::NodeProto &node, llvm::StringRef name, int64_t dflt) {
  for (const auto &a : node.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto::INT)
      return a.i();
  return dflt;
}

/// PyTorch's defaults: kaiming_uniform(a = sqrt 5) for weights, that is
/// uniform(+-1/sqrt(fan_in)), the same bound for biases, and ones/zeros for
/// batch and layer norm. Weights laid out [in, out] (Gemm without transB, MatMul) have
/// their fan_in first, which kaiming_uniform would misread, so they get the
/// equal uniform bound directly.
llvm::Expected<Initializer> Importer::defaultInitializer(llvm::StringRef name,
                                                         const TensorType &type) {
  auto uniform = [](double fanIn) {
    double bound = 1.0 / std::sqrt(std::max(fanIn, 1.0));
    return Initializer{"uniform", {-bound, bound}};
  };
  auto fanInOf = [&](const std::optional<TensorType> &w, bool inFirst) -> double {
    if (!w || w->rank() < 2)
      return 1;
    if (inFirst)
      return (double)w->shape[0];
    double f = (double)w->shape[1];
    for (size_t i = 2; i < w->rank(); ++i)
      f *= (double)w->shape[i];
    return f;
  };
  if (isFloat(type.dtype) && uses_.count(name))
    for (const Use &u : uses_[name]) {
      llvm::StringRef op = u.node->op_type();
      if (!isWeightSlot(op, u.slot))
        continue;
      if (op == "BatchNormalization")
        return u.slot == 1 || u.slot == 4 ? Initializer{"ones", {}} : Initializer{"zeros", {}};
      if (op == "LayerNormalization")
        return u.slot == 1 ? Initializer{"ones", {}} : Initializer{"zeros", {}};
      bool transB = op == "Gemm" && attrInt(*u.node, "transB", 0);
      if (u.slot == 1) {
        if (op == "Conv" || transB)
          return Initializer{"kaiming_uniform", {std::sqrt(5.0)}};
        return uniform(fanInOf(type, true));
      }
      // A bias: the fan_in of the weight beside it.
      std::optional<TensorType> w;
      if (u.node->input_size() > 1)
        w = declaredType(u.node->input(1));
      return uniform(fanInOf(w, op == "Gemm" && !transB));
    }
  return makeError("initializer '" + name + "' (" + toString(type) +
                   ") has no data, and graphc initialises only convolution, linear, "
                   "batch-norm and layer-norm weights of graph-only models");
}

llvm::Error Importer::createInputs() {
  bool anyBatch = false;
  for (const auto &in : g_.input()) {
    const std::string &name = in.name();
    if (initializers_.count(name))
      continue;
    inputs_[name] = &in;
  }
  for (const auto &in : g_.input()) {
    const std::string &name = in.name();
    if (initializers_.count(name))
      continue;
    // Graph-only models declare their weights as inputs without data.
    auto it = uses_.find(name);
    bool weight = it != uses_.end() && llvm::all_of(it->second, [](const Use &u) {
                    return isWeightSlot(u.node->op_type(), u.slot);
                  });
    if (weight) {
      auto type = declaredType(name);
      bool matmul =
          llvm::any_of(it->second, [](const Use &u) { return u.node->op_type() == "MatMul"; });
      weight = type && type->rank() >= 1 && (!matmul || type->rank() == 2);
    }
    if (weight) {
      weightInputs_.push_back(name);
      continue;
    }
    std::string what = "graph input '" + name + "'";
    if (!in.type().has_tensor_type())
      return makeError(what + " is not a tensor");
    const auto &tt = in.type().tensor_type();
    auto dt = fromOnnxDType(tt.elem_type());
    if (!dt)
      return makeError(what + " has element type " + onnxDTypeName(tt.elem_type()) +
                       ", which graphc does not handle (it handles FLOAT, FLOAT16, BFLOAT16, "
                       "INT64, INT32, BOOL)");
    if (!tt.has_shape())
      return makeError(what + " has no shape; graphc needs static shapes (axis 0 may be the "
                              "symbolic batch)");
    TensorType type;
    type.dtype = *dt;
    for (int axis = 0; axis < tt.shape().dim_size(); ++axis) {
      const auto &d = tt.shape().dim(axis);
      if (d.has_dim_value() && d.dim_value() > 0) {
        type.shape.push_back(d.dim_value());
        continue;
      }
      if (d.has_dim_value())
        return makeError(what + " has " +
                         (d.dim_value() == 0
                              ? llvm::Twine("an empty dimension")
                              : "a negative dimension (" + llvm::Twine(d.dim_value()) + ")") +
                         " at axis " + llvm::Twine(axis));
      if (axis != 0)
        return makeError(what + " has a dynamic dimension" +
                         (d.dim_param().empty() ? "" : " '" + d.dim_param() + "'") + " at axis " +
                         llvm::Twine(axis) + "; only axis 0 (the batch) may be dynamic");
      type.shape.push_back(batchDim());
      anyBatch = true;
    }
    if (auto e = checkTensorSize(type, what))
      return e;
    Node *n = graph_->createNode(Op::Input, {}, {type}, {}, uniqueName(name, name));
    Slot &s = slots_[name];
    s.value = n->result();
    s.producer = n->name();
  }
  // A model exported with a fixed batch: the size every input has at axis 0
  // is its batch, recorded as bound (another one is passes/Rebatch.h's).
  std::vector<Node *> ins = graph_->inputs();
  if (!anyBatch && !ins.empty() && llvm::all_of(ins, [&](const Node *in) {
        const TensorType &t = in->result()->type();
        return t.rank() > 0 && t.shape[0] == ins.front()->result()->type().shape[0];
      }))
    fixedBatch_ = ins.front()->result()->type().shape[0];
  return llvm::Error::success();
}

/// A name an exporter made up for a value, not a module's: PyTorch 2's
/// dynamo exporter's `val_<n>`, tf2onnx's `const_fold_opt__<n>`.
static bool isGeneratedName(llvm::StringRef name) {
  for (llvm::StringRef prefix : {"val_", "const_fold_opt__"})
    if (name.consume_front(prefix))
      return !name.empty() && llvm::all_of(name, llvm::isDigit);
  return false;
}

bool Importer::isConstantScalar(llvm::StringRef name, const Tensor &data) const {
  auto uses = uses_.find(name);
  if (data.numElements() != 1 || !isFloat(data.dtype()) || uses == uses_.end() ||
      isGraphOutput(name))
    return false;
  if (!std::isfinite(data.at(0)) || isGeneratedName(name))
    return true;
  return llvm::all_of(uses->second, [&](const Use &u) {
    if (u.node->op_type() != "Add" || u.node->output_size() != 1 ||
        isGraphOutput(u.node->output(0)))
      return false;
    auto sums = uses_.find(u.node->output(0));
    return sums != uses_.end() && llvm::all_of(sums->second, [](const Use &v) {
             return v.node->op_type() == "Sqrt";
           });
  });
}

llvm::Error Importer::createVariables() {
  for (const auto &t : g_.initializer()) {
    const std::string &name = t.name();
    if (!uses_.count(name) && !outputNames_.contains(name))
      continue;
    std::string what = "initializer '" + name + "'";
    auto type = onnxTensorType(t, what);
    if (!type)
      return type.takeError();
    Slot &s = slots_[name];
    s.origin = name;
    s.producer = name;
    bool asVariable = isFloat(type->dtype) && dataUses_.contains(name);
    Variable v;
    v.name = name;
    v.type = *type;
    v.kind = stateNames_.contains(name) ? VarKind::State : VarKind::Param;
    if (hasNoData(t) && type->numElements() > 0) {
      if (!asVariable)
        return makeError(what + " has no data, but its value is needed at import time");
      auto init = defaultInitializer(name, *type);
      if (!init)
        return init.takeError();
      v.init = std::move(*init);
    } else {
      auto data = fromOnnxTensor(t, what, baseDir_);
      if (!data)
        return data.takeError();
      s.known = std::make_shared<Known>(Known{*data, {}});
      s.foldable = !isFloat(type->dtype);
      asVariable = asVariable && !isConstantScalar(name, *data);
      v.data = std::move(*data);
    }
    if (asVariable) {
      s.variable = name;
      module_->addVariable(std::move(v));
    }
  }
  for (const std::string &name : weightInputs_) {
    auto type = declaredType(name);
    assert(type && "weight inputs have static declared types");
    Variable v;
    v.name = name;
    v.type = *type;
    v.kind = stateNames_.contains(name) ? VarKind::State : VarKind::Param;
    auto init = defaultInitializer(name, *type);
    if (!init)
      return init.takeError();
    v.init = std::move(*init);
    module_->addVariable(std::move(v));
    Slot &s = slots_[name];
    s.variable = name;
    s.origin = name;
    s.producer = name;
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> Importer::aliasVariable(llvm::StringRef from, llvm::StringRef name,
                                                    llvm::StringRef who) {
  const Slot *s = slot(from);
  if (module_->findVariable(name))
    return makeError(who + ": output '" + name + "' is already a variable");
  Variable v;
  v.name = name.str();
  if (s && !s->variable.empty()) {
    const Variable *src = module_->findVariable(s->variable);
    v.type = src->type;
    v.kind = src->kind;
    v.init = src->init;
    if (!src->data.empty())
      v.data = src->data.clone();
  } else if (s && s->known) {
    v.type = s->known->data.type();
    v.data = s->known->data.clone();
  } else {
    return makeError(who + ": input '" + from + "' is not an initializer");
  }
  if (stateNames_.contains(name))
    v.kind = VarKind::State;
  module_->addVariable(std::move(v));
  return name.str();
}

//===-- Values -------------------------------------------------------------===//

llvm::Expected<Value *> Importer::materialize(llvm::StringRef name, llvm::StringRef who) {
  Slot *s = slot(name);
  if (!s)
    return makeError(who + ": input '" + name + "' is not defined");
  if (s->value)
    return s->value;
  if (!s->dropped.empty())
    return makeError(who + ": reads '" + name + "', an output of node '" + s->producer +
                     "' that graphc does not model (" + s->dropped + ")");
  if (!s->variable.empty()) {
    const Variable *v = module_->findVariable(s->variable);
    Attrs a;
    a.set("var", v->name);
    std::string nodeName = uniqueName(v->name, isGraphOutput(name) ? name : "");
    s->value = graph_->createNode(Op::Variable, {}, {v->type}, std::move(a), nodeName)->result();
    return s->value;
  }
  if (!s->known)
    return makeError(who + ": input '" + name + "' has no value");
  if (s->known->foreignType)
    return makeError(who + ": input '" + name + "' has element type " +
                     onnxDTypeName(s->known->foreignType) + ", which graphc does not handle");
  if (s->known->hasBatch()) {
    needBatch();
    return makeError(who + ": input '" + name + "' is computed from the symbolic batch size (by '" +
                     s->producer + "') and cannot be a runtime tensor" + kBindBatchHint);
  }
  Attrs a;
  a.set("value", s->known->data);
  std::string base = isGraphOutput(name) ? name.str() : s->origin.empty() ? name.str() : s->origin;
  s->value = graph_
                 ->createNode(Op::Constant, {}, {s->known->data.type()}, std::move(a),
                              uniqueName(base, name))
                 ->result();
  return s->value;
}

llvm::Expected<TensorType> Importer::typeOf(llvm::StringRef name, llvm::StringRef who) const {
  const Slot *s = slot(name);
  if (s && s->value)
    return s->value->type();
  if (s && !s->variable.empty())
    return module_->findVariable(s->variable)->type;
  if (s && s->known)
    return s->known->data.type();
  if (s && !s->dropped.empty())
    return makeError(who + ": reads '" + name + "', an output of node '" + s->producer +
                     "' that graphc does not model (" + s->dropped + ")");
  return makeError(who + ": input '" + name + "' has no value");
}

//===-- The walk -----------------------------------------------------------===//

/// The value of a node's metadata entry `key`, or "". NodeProto's
/// metadata_props (field 9, ONNX 1.16) is newer than the ONNX library we may
/// build with, so the entries are read from the node's wire form, in which
/// protobuf keeps the fields it does not know (and writes those it knows:
/// the same code reads both; only Conv, ConvTranspose and Gemm nodes ask).
static std::string nodeMetadata(const onnx::NodeProto &node, llvm::StringRef key) {
  using google::protobuf::internal::WireFormatLite;
  constexpr uint32_t kMetadataTag = 9 << 3 | WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
  std::string wire = node.SerializeAsString();
  google::protobuf::io::CodedInputStream in((const uint8_t *)wire.data(), (int)wire.size());
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag != kMetadataTag) {
      if (!WireFormatLite::SkipField(&in, tag))
        break;
      continue;
    }
    std::string bytes;
    onnx::StringStringEntryProto entry;
    if (!WireFormatLite::ReadBytes(&in, &bytes) || !entry.ParseFromString(bytes))
      break;
    if (entry.key() == key)
      return entry.value();
  }
  return "";
}

/// Whether the exporter's optimizer folded a BatchNorm into this layer:
/// onnxscript's rewriter, which PyTorch's dynamo exporter runs, names its
/// rules in the node's metadata (FuseBatchNormIntoConv, ...IntoGemm).
static bool exporterFoldedBatchNorm(const onnx::NodeProto &node) {
  llvm::StringRef op = node.op_type();
  if (op != "Conv" && op != "ConvTranspose" && op != "Gemm")
    return false;
  return llvm::StringRef(nodeMetadata(node, "pkg.onnxscript.rewriter.rule_name"))
      .contains("FuseBatchNormInto");
}

llvm::Error Importer::importNode(const onnx::NodeProto &node) {
  NodeContext ctx(*this, node, scopeName(node));
  if (auto it = stochasticDepth_.absorbed.find(&node); it != stochasticDepth_.absorbed.end()) {
    std::string mul = scopeName(*stochasticDepth_.patterns[it->second].mul);
    for (int i = 0; i < node.output_size(); ++i)
      ctx.drop(i, "part of the stochastic depth that node '" + mul + "' imports as Dropout");
    return llvm::Error::success();
  }
  if (auto it = stochasticDepth_.muls.find(&node); it != stochasticDepth_.muls.end())
    return importStochasticDepth(ctx, stochasticDepth_.patterns[it->second]);
  // checkOps() refused every op without a rule.
  auto folded = tryFold(ctx);
  if (!folded)
    return folded.takeError();
  if (!*folded) {
    const OpRule *rule = findRule(node.op_type());
    assert(rule && rule->fn && "checkOps lets only ops with a rule through");
    if (auto e = rule->fn(ctx))
      return e;
  }
  if (node.input_size() > 1 && exporterFoldedBatchNorm(node))
    exporterFolded_.push_back(node.input(1));
  for (int i = 0; i < node.output_size(); ++i)
    if (!node.output(i).empty() && !slots_.count(node.output(i)))
      ctx.drop(i, "graphc does not model this output");
  return llvm::Error::success();
}

/// A graph output's declared element type and dimensions, where the file
/// gives them, must be what the graph computes: a model that declares
/// otherwise is corrupt or means something graphc does not compute.
static llvm::Error checkDeclaredOutput(const onnx::ValueInfoProto &o, const TensorType &computed) {
  std::string what = "graph output '" + o.name() + "'";
  if (!o.type().has_tensor_type())
    return o.has_type() ? makeError(what + " is declared as something other than a tensor")
                        : llvm::Error::success();
  const auto &tt = o.type().tensor_type();
  if (tt.elem_type() != onnx::TensorProto::UNDEFINED &&
      tt.elem_type() != toOnnxDType(computed.dtype))
    return makeError(what + " is declared with element type " + onnxDTypeName(tt.elem_type()) +
                     ", but the graph computes " + toString(computed));
  if (!tt.has_shape())
    return llvm::Error::success();
  const auto &dims = tt.shape().dim();
  if (dims.size() != (int)computed.rank())
    return makeError(what + " is declared with rank " + llvm::Twine(dims.size()) +
                     ", but the graph computes " + toString(computed));
  for (int i = 0; i < dims.size(); ++i) {
    if (!dims[i].has_dim_value())
      continue;
    int64_t d = dims[i].dim_value();
    if (d < 0)
      return makeError(what + " has a negative dimension (" + llvm::Twine(d) + ") at axis " +
                       llvm::Twine(i));
    if (computed.shape[i] != kBatchDim && d != computed.shape[i])
      return makeError(what + " is declared with dimension " + llvm::Twine(d) + " at axis " +
                       llvm::Twine(i) + ", but the graph computes " + toString(computed));
  }
  return llvm::Error::success();
}

llvm::Error Importer::bindOutputs() {
  for (const auto &o : g_.output()) {
    auto v = materialize(o.name(), "graph output '" + o.name() + "'");
    if (!v)
      return v.takeError();
    if (auto e = checkDeclaredOutput(o, (*v)->type()))
      return e;
    graph_->addOutput(*v);
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Module>> Importer::run() {
  if (auto e = checkModel())
    return e;
  module_ = std::make_unique<Module>(g_.name().empty() ? "model" : g_.name());
  graph_ = &module_->main();
  for (const auto &t : g_.initializer())
    if (!initializers_.try_emplace(t.name(), &t).second)
      return makeError("initializer '" + t.name() + "' is defined twice");
  for (const auto &o : g_.output())
    outputNames_.insert(o.name());
  if (auto e = sortNodes())
    return e;
  stochasticDepth_ = findStochasticDepth(g_, order_, producers_);
  if (auto e = checkOps())
    return e;
  scanUses();
  if (auto e = createInputs())
    return e;
  if (auto e = createVariables())
    return e;
  for (const onnx::NodeProto *node : order_)
    if (auto e = importNode(*node))
      return e;
  if (auto e = bindOutputs())
    return e;

  // Integer facts of a module graphc exported (OnnxExporter): batch, seed, ...
  Attrs facts;
  for (const auto &p : model_.metadata_props()) {
    llvm::StringRef key(p.key());
    long long v = 0;
    if (key.consume_front("graphc.") && !key.empty() && key != "source" &&
        !llvm::StringRef(p.value()).getAsInteger(10, v))
      facts.set(key, (int64_t)v);
  }
  auto plan = PlanInfo::fromAttrs(facts);
  if (!plan)
    return withContext(plan.takeError(), "the module imported from " + source_ + " is invalid");
  module_->plan() = std::move(*plan);
  module_->plan().source = "onnx";
  // A model graphc exported keeps the opset of the model it first came from.
  if (!module_->plan().onnxOpset)
    module_->plan().onnxOpset = opset_;
  if (!exporterFolded_.empty())
    module_->plan().exporterFolded = exporterFolded_;
  if (opts_.seed)
    module_->plan().seed = (int64_t)opts_.seed;
  if (fixedBatch_)
    module_->plan().batch = fixedBatch_;
  else if (opts_.batch > 0)
    module_->plan().batch = opts_.batch;
  if (auto e = verify(*module_))
    return withContext(std::move(e), "the module imported from " + source_ + " is invalid");
  return std::move(module_);
}

llvm::Expected<std::unique_ptr<Module>> importOnnx(llvm::StringRef bytes, const ImportOptions &opts,
                                                   llvm::StringRef source,
                                                   llvm::StringRef baseDir) {
  if (bytes.empty())
    return makeError(source + " is empty, not an ONNX model");
  if (opts.batch < 0 || opts.batchIfNeeded < 0)
    return makeError("batch size must be positive, got " +
                     llvm::Twine(std::min(opts.batch, opts.batchIfNeeded)));
  if (bytes.size() > (size_t)INT_MAX)
    return makeError(source + " is larger than 2 GiB; protobuf cannot read it. Save the model "
                              "with its weights as external data");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), (int)bytes.size()))
    return makeError(source + " is not an ONNX model: it does not parse as a ModelProto (a "
                              "truncated or corrupted file, or another format)");
  Importer importer(model, opts, source.str(), baseDir.str());
  auto m = importer.run();
  if (!m && importer.batchNeeded() && opts.batch == 0 && opts.batchIfNeeded > 0) {
    // The graph computes with its batch: import it again, bound.
    llvm::consumeError(m.takeError());
    ImportOptions bound = opts;
    bound.batch = opts.batchIfNeeded;
    Importer again(model, bound, source.str(), baseDir.str());
    m = again.run();
  }
  if (!m)
    return oneLine(m.takeError());
  return m;
}

} // namespace onnxfe

//===-- Entry points -------------------------------------------------------===//

llvm::Expected<std::unique_ptr<Module>>
importOnnxBytes(llvm::StringRef bytes, const ImportOptions &opts, llvm::StringRef name) {
  return onnxfe::importOnnx(bytes, opts, name, "");
}

llvm::Expected<std::unique_ptr<Module>> importOnnxFile(llvm::StringRef path,
                                                       const ImportOptions &opts) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  std::string source = "'";
  source += path;
  source += "'";
  return onnxfe::importOnnx((*buf)->getBuffer(), opts, source, dir.empty() ? "." : dir.str());
}

} // namespace graphc
