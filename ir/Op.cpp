#include "ir/Op.h"

#include "llvm/ADT/StringMap.h"

namespace graphc {

using namespace optrait;

static const OpInfo kOpTable[] = {
#define GRAPHC_OP(Name, MinIn, MaxIn, NumOut, Traits) {#Name, MinIn, MaxIn, NumOut, Traits},
#include "ir/Ops.def"
};

const OpInfo &opInfo(Op op) {
  return kOpTable[(unsigned)op];
}

unsigned numOps() {
  return sizeof(kOpTable) / sizeof(kOpTable[0]);
}

std::optional<Op> parseOp(llvm::StringRef name) {
  static const llvm::StringMap<Op> byName = [] {
    llvm::StringMap<Op> m;
    for (unsigned i = 0; i < numOps(); ++i)
      m[kOpTable[i].name] = (Op)i;
    return m;
  }();
  auto it = byName.find(name);
  if (it == byName.end())
    return std::nullopt;
  return it->second;
}

} // namespace graphc
