#include "ir/ShapeInference.h"

#include "ir/Diagnostics.h"

namespace graphc {

llvm::Expected<Node *> createInferredNode(Graph &g, Op op, llvm::ArrayRef<Value *> operands,
                                          llvm::ArrayRef<std::string> resultNames, Attrs attrs,
                                          llvm::StringRef name) {
  llvm::SmallVector<TensorType, 2> untyped(resultNames.size());
  Node *n = g.createNodeWithResultNames(op, operands, untyped, resultNames, std::move(attrs), name);
  auto types = inferResultTypes(*n);
  llvm::Error err = llvm::Error::success();
  if (!types)
    err = types.takeError();
  else if (types->size() != resultNames.size())
    err = nodeError(*n, "its shape function gives " + llvm::Twine(types->size()) +
                            " results, expected " + llvm::Twine(resultNames.size()));
  if (err) {
    g.erase(n);
    return err;
  }
  for (size_t i = 0; i < types->size(); ++i)
    n->result((unsigned)i)->setType((*types)[i]);
  return n;
}

llvm::Error inferShapes(Module &m) {
  for (Graph *g : m.graphs())
    for (Node *n : g->nodes()) {
      auto types = inferResultTypes(*n);
      if (!types)
        return types.takeError();
      int expected = opInfo(n->op()).numOutputs;
      if ((expected >= 0 && types->size() != (size_t)expected) || types->size() != n->numResults())
        return nodeError(*n, "has " + llvm::Twine(n->numResults()) + " results, its op gives " +
                                 llvm::Twine(types->size()));
      for (unsigned i = 0; i < n->numResults(); ++i)
        n->result(i)->setType((*types)[i]);
    }
  return llvm::Error::success();
}

/// Attributes that carry a tensor shape (and so may contain the batch symbol).
static constexpr llvm::StringLiteral kShapeAttrs[] = {"shape", "input_shape", "filter_shape",
                                                      "data_shape"};

llvm::Error bindBatch(Module &m, int64_t batch) {
  if (batch <= 0)
    return makeError("batch size must be positive, got " + llvm::Twine(batch));
  if (auto bound = m.batch(); bound && *bound != batch)
    return makeError("module is already bound to batch " + llvm::Twine(*bound) +
                     ", cannot rebind to " + llvm::Twine(batch));
  for (Graph *g : m.graphs())
    for (Node *n : g->nodes()) {
      if (n->op() == Op::Input)
        n->result()->setType(n->result()->type().bound(batch));
      for (llvm::StringRef name : kShapeAttrs) {
        if (!n->attrs().has(name))
          continue;
        Ints s = n->attrs().getInts(name);
        for (int64_t &d : s)
          if (d == kBatchDim)
            d = batch;
        n->attrs().set(name, s);
      }
    }
  m.plan().batch = batch;
  return inferShapes(m);
}

} // namespace graphc
