//===- PlaceDevices.h - The place-devices pass ------------------*- C++ -*-===//
//
// The `place-devices` pass runs the placer the tools put in
// CompileOptions::placer (placement/Placer.h: makePlacerFunction; passes do
// not depend on placement/, the tools join the two) and then checks what
// every later pass relies on:
//
//  1. every node of every graph has an assigned device and a reason;
//  2. every variable lists its storage devices (Variable::devices), and every
//     node that reads or writes a variable runs on one of them.
//
// Without a placer the pass fails and says where one comes from. The pass
// never changes the graph's structure; insert-transfers does that next.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> placeDevices(Module &m, const PlacerFunction &placer);

/// Postconditions 1 and 2 above; the first violation names the node.
llvm::Error checkPlaced(const Module &m);

} // namespace graphc
