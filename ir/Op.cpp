#include "ir/Op.h"

#include "llvm/ADT/StringMap.h"

namespace graphc {

static const OpInfo kOpTable[] = {
#define GRAPHC_OP(Name, MinIn, MaxIn, NumOut) {#Name, MinIn, MaxIn, NumOut},
#include "ir/Ops.def"
};

const OpInfo &opInfo(Op op) { return kOpTable[(unsigned)op]; }

unsigned numOps() { return sizeof(kOpTable) / sizeof(kOpTable[0]); }

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

bool isVariableUpdate(Op op) {
  switch (op) {
  case Op::Assign:
  case Op::ApplySGD:
  case Op::ApplyMomentum:
  case Op::ApplyRMSProp:
  case Op::ApplyAdam:
  case Op::LossScaleStep:
    return true;
  default:
    return false;
  }
}

} // namespace graphc
