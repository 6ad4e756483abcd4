//===- InsertTransfers.h - The insert-transfers pass ------------*- C++ -*-===//
//
// The `insert-transfers` pass makes every crossing between devices explicit.
// It runs after place-devices and guarantees, for every graph:
//
//  1. Every operand whose producer runs on another device than its reader is
//     read through a Transfer node {from, to} assigned (and requested) to the
//     reader's device. Variables read across devices (parameter-server mode)
//     are values like any other and get theirs too.
//  2. One Transfer per value and destination device, shared by every reader
//     of that value there; transfers that exist already are reused, so the
//     pass is idempotent.
//  3. Exempt: operands of a Transfer (crossing is its job) and edges into or
//     out of an AllReduce (a collective spans its participants' devices by
//     design and delivers on each of them).
//  4. A new Transfer sits right after its producer in graph order (the
//     executor issues in graph order, so the copy starts as early as it can),
//     takes its readers' tower when they agree, is named
//     `<value>/to_<device>` (':' as '_') and gives the reason
//     "transfer from <device>".
//
// The module still verifies. Every node must have an assigned device.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

namespace graphc {

llvm::Expected<bool> insertTransfers(Module &m);

/// Whether the edge from `v`'s producer to `reader` may cross devices without
/// a Transfer (rule 3).
bool crossesDevicesByDesign(const Value &v, const Node &reader);

} // namespace graphc
