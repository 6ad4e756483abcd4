#include "ir/Diagnostics.h"

#include "ir/Module.h"

namespace graphc {

llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

llvm::Error nodeError(const Node &n, const llvm::Twine &msg) {
  return makeError("node '" + n.name() + "' (" + opName(n.op()) + "): " + msg);
}

llvm::Error withContext(llvm::Error e, const llvm::Twine &context) {
  if (!e)
    return e;
  std::string msg = llvm::toString(std::move(e));
  return makeError(context + ": " + msg);
}

} // namespace graphc
