//===- Checkpoint.h - Saving and restoring training state --------*- C++ -*-===//
//
// A checkpoint is one archive (ir/Archive.h, written crash-safely) holding:
//   text:    the forward model in the text form (weights elided) followed by
//            nothing else, with meta step, epoch, optimizer, model name; enough
//            for `graphrun eval --checkpoint` to rebuild the model alone;
//   tensors: every variable by its plain name (parameters, running
//            statistics, optimizer slots). No tower prefixes, no device
//            strings: a checkpoint restores on any number of devices.
// Restoring is strict: a checkpoint that does not fit is refused with the
// lists of missing, unexpected and mis-shaped tensors. Optimizer slots are
// required when the target has them (resuming training) and ignored when it
// has none (evaluation, export).
//
// A checkpoint directory holds step-NNNNNNNN.gck files and `latest`, a small
// file naming the newest; `latest` is replaced only after its checkpoint is
// fully on disk, so a crash at any moment leaves a usable checkpoint.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "ir/Archive.h"

namespace graphc {

struct CheckpointInfo {
  uint64_t step = 0;
  int64_t epoch = 0;
};

/// Writes the executor's variables and the forward model to `path`.
llvm::Error saveCheckpoint(llvm::StringRef path, const Module &forward, const Executor &ex,
                           const Module &compiled, CheckpointInfo info);

/// Writes a step file into `dir` (created if needed) and points `latest` at it.
/// Keeps the newest `keep` step files. Returns the file written.
llvm::Expected<std::string> saveCheckpointInDir(llvm::StringRef dir, const Module &forward,
                                                const Executor &ex, const Module &compiled,
                                                CheckpointInfo info, unsigned keep = 3);

/// A file, or a directory with `latest`: the checkpoint file to read.
llvm::Expected<std::string> resolveCheckpoint(llvm::StringRef pathOrDir);

struct LoadedCheckpoint {
  std::unique_ptr<Module> forward; ///< the model, variables carrying their saved values
  std::vector<NamedTensor> tensors;
  CheckpointInfo info;
};
llvm::Expected<LoadedCheckpoint> loadCheckpoint(llvm::StringRef pathOrDir);

/// Copies the checkpoint's tensors into the executor's variables (strictly).
llvm::Error restoreInto(const LoadedCheckpoint &ckpt, const Module &compiled, Executor &ex);

/// Checks that a checkpoint directory can be written (before training starts).
llvm::Error checkWritableDir(llvm::StringRef dir);

} // namespace graphc
