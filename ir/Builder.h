//===- Builder.h - Creating nodes with names, scopes and types --*- C++ -*-===//
//
// Nodes are created through a Builder, never by wiring pointers by hand. The
// builder prefixes names with the current scope ("Mixed_5b/branch1x1/conv"),
// keeps them unique, stamps the current tower and requested device, and infers
// result types with the op's shape function.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

class Builder {
public:
  explicit Builder(Graph &g) : graph_(&g) {}
  /// A builder for `n`'s graph that stamps `n`'s tower and requested device.
  static Builder like(const Node &n);

  Graph &graph() const { return *graph_; }
  Module &module() const { return graph_->module(); }

  /// RAII: names created inside get `name/` in front.
  class Scope {
  public:
    Scope(Builder &b, llvm::StringRef name);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Builder &b_;
    size_t previous_;
  };

  /// The current scope joined to `leaf`, made unique in the graph.
  std::string name(llvm::StringRef leaf) const;
  const std::string &scope() const { return scope_; }

  void setTower(int t) { tower_ = t; }
  int tower() const { return tower_; }
  /// The device stamped on nodes it creates; none: leave them unrequested.
  void setRequestedDevice(std::optional<DeviceId> d) { device_ = d; }

  Value *input(llvm::StringRef name, TensorType type);
  /// A read of module variable `var` (which must exist).
  Value *variable(llvm::StringRef var);
  /// Adds a variable to the module and reads it.
  Value *newVariable(Variable v);
  Value *constant(Tensor value, llvm::StringRef leaf = "const");
  Value *scalar(float v, llvm::StringRef leaf = "const") { return constant(Tensor::scalar(v), leaf); }

  /// Creates a node; shape errors come back as an llvm::Error naming it.
  llvm::Expected<Node *> tryCreate(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs = {},
                                   llvm::StringRef leaf = "");
  /// Creates a node whose operands are known to fit (the program's own
  /// graphs); a shape error here is a bug and aborts with its message.
  Node *createNode(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs = {},
                   llvm::StringRef leaf = "");
  /// createNode(...)->result(0).
  Value *create(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs = {},
                llvm::StringRef leaf = "") {
    return createNode(op, operands, std::move(attrs), leaf)->result(0);
  }

private:
  Node *stamp(Node *n) const;

  Graph *graph_;
  std::string scope_;
  int tower_ = -1;
  std::optional<DeviceId> device_;
};

} // namespace graphc
