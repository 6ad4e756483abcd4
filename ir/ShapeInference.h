//===- ShapeInference.h - Result types from operand types ------*- C++ -*-===//
//
// Every op has a shape function (OpShapes.cpp) that computes its result types
// from its operands' types and its attributes; a mismatch is an llvm::Error
// that names the node, its op and the operands involved.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

namespace graphc {

/// The result types `n` should have.
llvm::Expected<llvm::SmallVector<TensorType, 2>> inferResultTypes(const Node &n);

/// Creates `op` in `g` with results named `resultNames` and typed by the op's
/// shape function. Shape functions read the node, so it is created with
/// untyped results first; when the function fails or gives another number of
/// results, the node is removed again and the error returned.
llvm::Expected<Node *> createInferredNode(Graph &g, Op op, llvm::ArrayRef<Value *> operands,
                                          llvm::ArrayRef<std::string> resultNames, Attrs attrs,
                                          llvm::StringRef name);

/// Re-infers every node of every graph in order and updates result types.
llvm::Error inferShapes(Module &m);

/// Binds the symbolic batch dimension to `batch` everywhere (graph inputs,
/// attributes that carry shapes) and re-infers shapes. Records meta "batch".
/// An error if the module is already bound to another size.
llvm::Error bindBatch(Module &m, int64_t batch);

/// Numpy broadcasting of two shapes; std::nullopt when they do not broadcast.
std::optional<Dims> broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Output size of a sliding window along one spatial dimension (Conv, pools).
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                         int64_t padEnd, int64_t dilation, bool ceilMode);

/// The resolved [start, end) and step of Slice along one axis of size `dim`.
struct SliceRange {
  int64_t start, end, step, size;
};
SliceRange resolveSlice(int64_t dim, int64_t start, int64_t end, int64_t step);

} // namespace graphc
