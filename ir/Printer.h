//===- Printer.h - The text form of a module --------------------*- C++ -*-===//
//
// One text form for dumps, golden tests and `graphc print`; parse(print(m))
// reproduces m (Parser.h). The grammar, by example:
//
//   module inception_v3 {
//     meta batch = 32, source = "onnx"
//     var fc.weight : f32[1000,2048] param kaiming_uniform(2.23606797749979) @ "cpu:0"
//     var fc.bias : f32[1000] param data "00000000..."     (print with weights)
//     var Conv2d_1a_3x3.bn.running_mean : f32[32] state elided   (weights left out)
//     graph main {
//       %x = Input : f32[N,3,299,299]
//       %fc.weight = Variable {var = "fc.weight"} : f32[1000,2048]
//       %Conv2d_1a_3x3/conv = Conv(%x, %w) {group = 1, strides = [2, 2]} : f32[N,32,149,149]
//           tower 0 requested "gpu:0" device "gpu:0" reason "colocated with ..."
//       %s:0, %s:1 = Split(%y) {axis = 1, split = [4, 4]} : f32[N,4], f32[N,4]
//       ApplySGD(%g, %lr) {lr = 0.1, var = "fc.weight"} name "sgd/fc.weight"
//       return %logits
//     }
//   }
//
// A node's name is printed (`name "..."`) only when it differs from its single
// result's name, or from the common `base` of results `base:i`. Identifiers
// are [A-Za-z0-9_./:-]+; anything else is quoted.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

struct PrintOptions {
  /// Print variable data in hex (lossless); otherwise it is printed `elided`.
  bool weights = false;
};

void print(const Module &m, llvm::raw_ostream &os, PrintOptions opts = {});
std::string toText(const Module &m, PrintOptions opts = {});
/// One node on one line, as in the module form (for messages and dumps).
std::string toText(const Node &n);

} // namespace graphc
