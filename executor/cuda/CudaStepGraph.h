//===- CudaStepGraph.h - Step graphs and GPU collectives ---------*- C++ -*-===//
//
// What the CUDA backend hands the executor through the device registry
// (executor/cuda/CudaDevices.cpp): a step captured as one CUDA graph
// (executor/StepCapture.h) and the collective engine of GPU groups.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/StepCapture.h"

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace graphc {

class CollectiveEngine;
class CrossWorkerExchange;
class Device;

/// The capture over the executor's devices (all CUDA devices).
std::unique_ptr<StepCapture> createCudaStepCapture(llvm::ArrayRef<Device *> devices,
                                                   std::chrono::milliseconds timeout);
/// The collective engine for groups of CUDA devices (devices by rank); the
/// groups named in `acrossWorkers` also span the other workers' GPUs, their
/// NCCL communicators built through `exchange`.
llvm::Expected<std::unique_ptr<CollectiveEngine>> createCudaCollectives(
    std::chrono::milliseconds timeout, const std::map<std::string, std::vector<Device *>> &groups,
    const std::set<std::string> &acrossWorkers = {}, CrossWorkerExchange *exchange = nullptr);

} // namespace graphc
