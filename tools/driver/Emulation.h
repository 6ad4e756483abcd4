//===- Emulation.h - A plan's GPUs on the devices at hand ---------*- C++ -*-===//
//
// `graphrun train --emulate` runs a placed plan where its GPUs are not: as
// CPU devices cpu:1.. on a machine without a GPU (at the relative speeds of
// the cluster it was placed for), or as logical devices folded onto the
// GPUs this machine has.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "ir/Module.h"

#include <string>

namespace graphc {

/// Sets `exec` to run the plan's GPUs on this machine's devices. Returns the
/// one line the run plan prints about it ("" for a plan without GPUs).
std::string emulateDevices(const Module &placed, ExecutorOptions &exec);

} // namespace graphc
