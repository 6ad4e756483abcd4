//===- Modes.h - The tower passes' modes, parsed once -----------*- C++ -*-===//
//
// The choices a user makes on the command line (--params, --bn, --remainder,
// --split, --strategy, --precision, --recompute) as enums and small structs.
// The tools parse each once, at the edge, with the functions below (whose
// errors are the one line a user sees); passes switch on the values and never
// read the text again.
// modeName() gives the text back for messages, module meta and reports.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DeviceId.h"
#include "ir/LossKind.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace graphc {

/// --bn: BatchNorm across towers (docs/towers.md).
enum class BnMode : unsigned char {
  Local,  ///< per-tower batch statistics
  Sync,   ///< statistics over the global batch, across towers
  Frozen, ///< the moving averages, as in inference
};

/// --remainder: a global batch that does not split as asked (SplitBatch.h).
enum class RemainderPolicy : unsigned char { Error, Drop, Uneven };

/// --params: where variables live (AggregateGradients.h).
struct ParamPlacement {
  enum Kind : unsigned char {
    Cpu,      ///< parameter server on the host
    Gpu,      ///< every variable on one GPU (`gpu`)
    Spread,   ///< each variable on one GPU, balanced by bytes
    Mirrored, ///< a replica per tower, all-reduced
    /// By predicted step time under each device's memory (--params auto):
    /// ParamsAutoStrategy (passes/strategy/ParamsAutoStrategy.h) compiles
    /// the other modes and keeps the best before any pass sees it.
    Auto,
  };
  Kind kind = Cpu;
  unsigned gpu = 0; ///< Gpu: K of gpu:K

  static ParamPlacement onGpu(unsigned k) { return {Gpu, k}; }
  friend bool operator==(ParamPlacement a, ParamPlacement b) {
    return a.kind == b.kind && (a.kind != Gpu || a.gpu == b.gpu);
  }
};

/// --split: how the global batch is shared among the towers.
struct SplitSpec {
  enum Kind : unsigned char {
    Even,    ///< B/N each (the remainder policy decides the rest)
    Weights, ///< B·w_t/Σw (--split 4,4,2)
    /// In proportion to the speeds of the towers' devices (--split auto):
    /// the tools resolve it into Weights from the cluster before compiling.
    Auto,
  };
  Kind kind = Even;
  std::vector<double> weights; ///< Weights: one per tower
};

/// --strategy: how a cluster's devices share the work.
enum class Strategy : unsigned char {
  DataParallel,  ///< a tower per device, the batch split among them (the default)
  ModelParallel, ///< one replica's graph spread over the devices (placement/ModelParallel.h)
  Pipeline,      ///< stages of one replica, micro-batches through them (passes/PipelineStages.h)
};

/// --precision: what the forward and backward passes compute in. Variables,
/// their updates and the loss stay f32 in every mode.
enum class Precision : unsigned char {
  FP32, ///< everything in f32 (the default)
  BF16, ///< convolutions, batch norms, activations, pooling in bf16 (passes/MixedPrecision.h)
  FP16, ///< f16 with dynamic loss scaling (GPUs; not implemented: refused)
};

/// --pipeline-schedule: the order of a pipeline's blocks (passes/PipelineStages.h).
enum class PipelineSchedule : unsigned char {
  GPipe,    ///< every micro-batch's forward pass, then every backward pass
  OneFOneB, ///< 1F1B: after a warm-up, one forward and one backward in turn
};

/// --recompute: activations recomputed in the backward pass (passes/Recompute.h).
enum class RecomputeMode : unsigned char {
  Off,  ///< never (the default)
  Auto, ///< when the placed plan does not fit its devices' memory, as little as fits
};

llvm::Expected<BnMode> parseBnMode(llvm::StringRef s);
/// "fp32", "bf16" or "fp16".
llvm::Expected<Precision> parsePrecision(llvm::StringRef s);
/// "data-parallel", "model-parallel" or "pipeline".
llvm::Expected<Strategy> parseStrategy(llvm::StringRef s);
llvm::Expected<RemainderPolicy> parseRemainderPolicy(llvm::StringRef s);
/// "cpu", "gpu:K", "spread", "mirrored" or "auto".
llvm::Expected<ParamPlacement> parseParamPlacement(llvm::StringRef s);
/// "auto", or "4,4,2": finite non-negative weights (their count, and that
/// they are not all zero, is checked against the towers by planBatchSplit).
llvm::Expected<SplitSpec> parseSplitSpec(llvm::StringRef s);
/// "auto" or "off".
llvm::Expected<RecomputeMode> parseRecomputeMode(llvm::StringRef s);
/// "cross-entropy", "nll" or "mse".
llvm::Expected<LossKind> parseLossKind(llvm::StringRef s);
/// "1f1b" or "gpipe".
llvm::Expected<PipelineSchedule> parsePipelineSchedule(llvm::StringRef s);

llvm::StringRef modeName(BnMode m);
llvm::StringRef modeName(Strategy s);
llvm::StringRef modeName(Precision p);
llvm::StringRef modeName(RemainderPolicy p);
llvm::StringRef modeName(RecomputeMode m);
llvm::StringRef modeName(PipelineSchedule s);
llvm::StringRef modeName(LossKind k);
std::string modeName(ParamPlacement p);
std::string modeName(const SplitSpec &s);

} // namespace graphc
