//===- GoldenOptions.h - `# options:` words of the tower goldens -*- C++ -*-===//
//
// `towers=2 params=mirrored bn=sync remainder=drop split=4,4,2 batch=4
// bucket-bytes=64 optimizer=sgd momentum=0.5` into CompileOptions; an unknown
// key or a malformed number is an error naming it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Diagnostics.h"
#include "passes/CompileOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace graphc::towertest {

inline llvm::Expected<CompileOptions> parseGoldenOptions(llvm::StringRef words) {
  CompileOptions o;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  words.split(parts, ' ', -1, false);
  for (llvm::StringRef p : parts) {
    // Not a structured binding: clang 14 (the sanitizer and fuzzing builds)
    // cannot capture one in the lambdas below.
    std::pair<llvm::StringRef, llvm::StringRef> kv = p.split('=');
    llvm::StringRef key = kv.first, value = kv.second;
    auto integer = [&](auto &field) -> llvm::Error {
      long long v = 0;
      if (value.getAsInteger(10, v))
        return makeError("option '" + key + "' needs an integer, got '" + value + "'");
      field = (std::remove_reference_t<decltype(field)>)v;
      return llvm::Error::success();
    };
    auto into = [](auto parsed, auto &field) -> llvm::Error {
      if (!parsed)
        return parsed.takeError();
      field = *parsed;
      return llvm::Error::success();
    };
    llvm::Error e = llvm::Error::success();
    if (key == "batch")
      e = integer(o.batch);
    else if (key == "towers")
      e = integer(o.towers);
    else if (key == "bucket-bytes")
      e = integer(o.bucketBytes);
    else if (key == "params")
      e = into(parseParamPlacement(value), o.params);
    else if (key == "bn")
      e = into(parseBnMode(value), o.bn);
    else if (key == "remainder")
      e = into(parseRemainderPolicy(value), o.remainder);
    else if (key == "optimizer")
      o.optimizer = value.str();
    else if (key == "momentum" || key == "split") {
      llvm::SmallVector<llvm::StringRef, 4> items;
      value.split(items, ',');
      std::vector<double> numbers;
      for (llvm::StringRef item : items) {
        double d = 0;
        if (item.getAsDouble(d))
          return makeError("option '" + key + "' needs numbers, got '" + value + "'");
        numbers.push_back(d);
      }
      if (key == "split")
        o.split = {SplitSpec::Weights, numbers};
      else if (numbers.size() == 1)
        o.momentum = numbers[0];
      else
        e = makeError("option 'momentum' takes one number");
    } else
      e = makeError("unknown option '" + key + "'");
    if (e)
      return e;
  }
  return o;
}

} // namespace graphc::towertest
