//===- FuzzTextIr.cpp - The text IR parser --------------------------------===//
//
// Text IR (graphc print, dumps, .gir files) through the parser and its
// per-node shape checks. A module that parses and verifies must print and
// parse back (Printer.h's promise, parse(print(m)) == m).

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "tests/fuzz/FuzzSupport.h"

using namespace graphc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto m = parseModule(fuzz::bytesOf(data, size), "fuzz.gir");
  if (!fuzz::accepted(m))
    return 0;
  if (auto e = verify(**m)) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  PrintOptions withData;
  withData.weights = true;
  auto again = parseModule(toText(**m, withData), "printed.gir");
  if (!again)
    fuzz::broken("a parsed, verified module does not parse back from its printed form",
                 again.takeError());
  return 0;
}
