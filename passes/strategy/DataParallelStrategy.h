//===- DataParallelStrategy.h - A tower per device ---------------*- C++ -*-===//
//
// The data-parallel plan: the training pipeline with a tower per GPU of
// every worker (in rank order: tower t on gpu:t), the batch split among
// them, then kPlacementPipeline on the cluster. Before the pipeline runs,
// the plan records what the strategy decided: its cluster, the parameter
// mode, the batch shares (--split weights, or auto: the towers' devices'
// speeds) and, for several workers or a cluster of tasks, its workers,
// their towers and its tasks.
//
// Without devices (no --gpus, --cluster or tasks with GPUs) the plan is the
// host's where the request allows it (PlacementRequest::onHost): the
// training pipeline alone, one host tower per worker when there are several.
//
// With no batch given and a symbolic one in the model, a placed plan takes
// kDefaultBatch in all, as `graphrun train` does. Errors: a cluster file with several
// workers or tasks, a cluster without GPUs, --towers other than one per GPU
// with several workers, more towers than GPUs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileStrategy.h"

namespace graphc {

class DataParallelStrategy : public CompileStrategy {
public:
  llvm::StringRef name() const override { return "data-parallel"; }
  llvm::Expected<std::unique_ptr<Module>> compile(const Module &forward, const CompileRequest &req,
                                                  const PlacementRequest &place) const override;
};

/// The data-parallel compile with the registered pipelines `after` run last,
/// by the same pass manager (the parameter-server strategy's sharding).
llvm::Expected<std::unique_ptr<Module>> compileDataParallel(const Module &forward,
                                                            CompileRequest req,
                                                            const PlacementRequest &place,
                                                            llvm::ArrayRef<llvm::StringRef> after);

/// One line on how a placed plan shares its batch among the towers and why
/// (--split weights, or auto and the devices' speeds); "" for even shares.
std::string describeSplit(const Module &plan);

} // namespace graphc
