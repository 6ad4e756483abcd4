//===- FuzzTextIr.cpp - The text IR parser --------------------------------===//
//
// Text IR (graphc print, dumps, .gir files) through the parser and its
// per-node shape checks. A module that parses and verifies must print and
// parse back (Printer.h's promise, parse(print(m)) == m), and the initial
// values of its (small) variables must be refused or finite, and come in
// bounded time: an initializer that can only give NaN, or a trunc_normal that
// redraws forever, is refused (issue 28).

#include "ir/Initializers.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "tests/fuzz/FuzzSupport.h"

#include <cmath>

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto m = parseModule(fuzz::bytesOf(data, size), "fuzz.gir");
  if (!fuzz::accepted(m))
    return 0;
  if (auto e = verify(**m)) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  for (const Variable &v : (*m)->variables()) {
    if (!v.data.empty() || v.init.fn == "elided" || v.type.numElements() > 4096)
      continue;
    auto t = initialValue(v, 1);
    if (!fuzz::accepted(t) || !isFloat(t->dtype()))
      continue;
    for (int64_t i = 0; i < t->numElements(); ++i)
      if (!std::isfinite(t->at(i)))
        fuzz::broken("a verified module's initializer gives a value that is not finite");
  }
  PrintOptions withData;
  withData.weights = true;
  auto again = parseModule(toText(**m, withData), "printed.gir");
  if (!again)
    fuzz::broken("a parsed, verified module does not parse back from its printed form",
                 again.takeError());
  return 0;
}
