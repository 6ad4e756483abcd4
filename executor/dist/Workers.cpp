//===- Workers.cpp - The processes of a run, as the run sees them ---------===//

#include "executor/dist/Workers.h"

#include "ir/Diagnostics.h"

namespace graphc {

llvm::Error checkPsTasksFit(unsigned ps, unsigned processes) {
  if (ps < processes)
    return llvm::Error::success();
  return makeError("the run has " + llvm::Twine(processes) + " process" +
                   (processes == 1 ? "" : "es") + " and " + llvm::Twine(ps) + " ps task" +
                   (ps == 1 ? "" : "s") + ": no rank is left to train");
}

} // namespace graphc
