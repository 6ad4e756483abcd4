//===- ParamsAutoStrategy.h - --params auto: the mode by predicted step -*- C++ -*-===//
//
// `--params auto` compiles the plan once per candidate mode, each by the
// data-parallel strategy (or the parameter-server one, with ps tasks), and
// keeps the one the step simulator (placement/analysis/StepSimulator.h)
// predicts fastest
// among those whose every device holds its variables and peak activations:
//
//   candidates  cpu; gpu:K for the GPU with the most memory (then the
//               fastest, then the lowest index); spread and mirrored when
//               there are two towers or more, mirrored with --bucket-mb's
//               cap and (unless --bucket-mb is given) caps of 1, 4, 16 and
//               64 MiB and one bucket. A candidate the compile refuses (ps
//               tasks hold variables on hosts only, say) is listed with the
//               reason and not chosen.
//   step        graphc simulate's (simulateStep): the executor's
//               order, each bucket's all-reduce overlapping the rest of the
//               backward pass; the bottleneck named is the cost model's
//               busiest device (compute or communication).
//   fits        memoryNeeds() (placement/analysis/MemoryNeeds.h) of the
//               compiled plan: variables, optimizer slots and state where
//               the mode stores them, plus the executor's planned
//               activations per device.
//   choice      the least predicted step. Steps within 2% of the best count
//               as tied (the model is not a measurement), and
//               a tie goes to the mode that leaves the most memory on the
//               fullest GPU (room for a larger batch), then to the one that
//               moves fewer bytes per step.
//
// Under --dump-dir each candidate's passes are dumped into a directory of
// its own, named for it ("cpu", "gpu-0", "mirrored-4-MB-buckets").
//
// With a fast host link every mode is compute-bound and the tie goes to
// `cpu` (no variable on a GPU); with a slow one, `cpu` waits on the link and
// a GPU mode wins. The decision and every alternative's figures travel with
// the plan (meta `params`, `params_chosen`, `params_auto`) for --explain and
// graphrun's run plan.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/CompileStrategy.h"

namespace graphc {

/// The plan under --params auto (req.options.params is ignored). An error
/// when no candidate fits, with each one's devices that do not.
class ParamsAutoStrategy : public CompileStrategy {
public:
  llvm::StringRef name() const override { return "params-auto"; }
  llvm::Expected<std::unique_ptr<Module>> compile(const Module &forward, const CompileRequest &req,
                                                  const PlacementRequest &place) const override;
};

/// "--params auto chose cpu: ..." and, with `table`, each candidate's
/// predicted step, bottleneck, traffic and fullest GPU; "" for a plan whose
/// mode was given.
std::string describeParamsChoice(const Module &plan, bool table);

} // namespace graphc
