#include "ir/Builder.h"

#include "ir/ShapeInference.h"

#include "llvm/Support/ErrorHandling.h"

namespace graphc {

Builder Builder::like(const Node &n) {
  Builder b(n.graph());
  b.setTower(n.tower());
  b.setRequestedDevice(n.requestedDevice());
  return b;
}

Builder::Scope::Scope(Builder &b, llvm::StringRef name) : b_(b), previous_(b.scope_.size()) {
  if (!b_.scope_.empty())
    b_.scope_ += "/";
  b_.scope_ += name.str();
}

Builder::Scope::~Scope() { b_.scope_.resize(previous_); }

std::string Builder::name(llvm::StringRef leaf) const {
  if (scope_.empty())
    return graph_->uniqueName(leaf);
  std::string full = leaf.empty() ? scope_ : scope_ + "/" + leaf.str();
  return graph_->uniqueName(full);
}

Node *Builder::stamp(Node *n) const {
  n->setTower(tower_);
  if (device_)
    n->setRequestedDevice(device_);
  return n;
}

Value *Builder::input(llvm::StringRef name, TensorType type) {
  return stamp(graph_->createNode(Op::Input, {}, {type}, {}, this->name(name)))->result();
}

Value *Builder::variable(llvm::StringRef var) {
  const Variable *v = module().findVariable(var);
  if (!v)
    llvm::report_fatal_error(llvm::Twine("reading unknown variable '") + var + "'");
  Attrs a;
  a.set("var", var.str());
  return stamp(graph_->createNode(Op::Variable, {}, {v->type}, std::move(a), graph_->uniqueName(var)))
      ->result();
}

Value *Builder::newVariable(Variable v) {
  std::string name = v.name;
  module().addVariable(std::move(v));
  return variable(name);
}

Value *Builder::constant(Tensor value, llvm::StringRef leaf) {
  Attrs a;
  TensorType t = value.type();
  a.set("value", std::move(value));
  return stamp(graph_->createNode(Op::Constant, {}, {t}, std::move(a), name(leaf)))->result();
}

llvm::Expected<Node *> Builder::tryCreate(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs,
                                          llvm::StringRef leaf) {
  std::string nodeName = name(leaf.empty() ? opName(op) : leaf);
  int fixed = opInfo(op).numOutputs;
  size_t count = fixed >= 0              ? (size_t)fixed
                 : op == Op::Split       ? attrs.getInts("split").size()
                 : op == Op::SplitBatch  ? attrs.getInts("sizes").size()
                                         : operands.size();
  std::vector<std::string> names;
  names.reserve(count);
  if (count == 1) // the result is named after the node
    names.push_back(std::move(nodeName));
  else
    for (size_t i = 0; i < count; ++i)
      names.push_back(nodeName + ":" + std::to_string(i));
  auto n = createInferredNode(*graph_, op, operands, names, std::move(attrs),
                              count == 1 ? names[0] : nodeName);
  if (!n)
    return n.takeError();
  return stamp(*n);
}

Node *Builder::createNode(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs,
                          llvm::StringRef leaf) {
  auto n = tryCreate(op, operands, std::move(attrs), leaf);
  if (!n)
    llvm::report_fatal_error(llvm::Twine("internal graph construction failed: ") +
                             llvm::toString(n.takeError()));
  return *n;
}

} // namespace graphc
