//===- Checkpoint.h - Saving and restoring training state --------*- C++ -*-===//
//
// A checkpoint is one archive (ir/Archive.h: format version, a checksum for
// the header and one per tensor, written crash-safely) holding:
//   text:    a header module whose meta is the run's position (step, epoch,
//            batches and samples of the epoch already consumed) and identity
//            (seed, global batch, data set), followed by the forward model in
//            the text form (weights elided): enough for `graphrun eval` and
//            `graphrun export` to rebuild the model alone;
//   tensors: every variable by its plain name (parameters, running
//            statistics, optimizer slots; not gradient accumulators, which
//            are zero whenever a checkpoint is written). No tower prefixes,
//            no device strings: a checkpoint restores on any number of
//            devices.
//
// Everything that reads a checkpoint is strict. loadCheckpoint refuses a
// file that is damaged (checksums), whose model lacks a tensor for one of its
// variables or has it with another type, that holds a tensor its model does
// not know (optimizer slots of its trainable variables aside), or whose
// values are not finite. restoreInto then refuses a checkpoint that does not
// fit the run's compiled module, with the lists of missing, unexpected and
// mis-shaped tensors. Optimizer slots are required when the target has them
// (resuming training) and ignored when it has none (evaluation, export).
// Dynamic loss scaling's state (ir/Module.h: isLossScaleState) is restored
// when both sides have it, ignored by a run that does not scale, and left at
// its initial value in a run that starts scaling from an unscaled checkpoint.
//
// A checkpoint directory holds step-NNNNNNNN.gck files and `latest`, a file
// holding the newest one's name and nothing else; `latest` is replaced only
// after its checkpoint is fully on disk, and the newest `keep` step files are
// kept (2 by default), so a crash at any moment, or one damaged file, leaves a
// usable checkpoint. `--resume` takes the newest one that loads and says
// which damaged ones it passed over; eval and export take exactly the one
// `latest` names.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/Executor.h"
#include "ir/Archive.h"

#include <optional>
#include <set>

namespace graphc {

/// Where a run stands, and which run it is.
struct CheckpointInfo {
  uint64_t step = 0; ///< training steps done
  int64_t epoch = 0; ///< the epoch the next step reads from
  /// Batches handed out and permutation positions consumed in that epoch
  /// (DataLoader::position()).
  int64_t epochBatches = 0, epochSamples = 0;
  /// The run's seed, global batch and data set: the data order depends on them.
  uint64_t seed = 0;
  int64_t batch = 0;
  std::string data;
};

/// The number of step files a directory keeps unless told otherwise.
inline constexpr unsigned kDefaultKeepCheckpoints = 2;

/// Writes the executor's variables and the forward model to `path`.
llvm::Error saveCheckpoint(llvm::StringRef path, const Module &forward, const Executor &ex,
                           const Module &compiled, const CheckpointInfo &info);

/// The same from tensors gathered elsewhere (a run with parameter-server
/// tasks, whose variables live in several processes), written in the order
/// of `compiled`'s variables; every one of them must be there.
llvm::Error saveCheckpoint(llvm::StringRef path, const Module &forward,
                           llvm::ArrayRef<NamedTensor> tensors, const Module &compiled,
                           const CheckpointInfo &info);
/// Writes a step file into `dir` (created if needed), points `latest` at it,
/// and keeps the newest `keep` step files. Returns the file written. When the
/// write fails (a full disk), the message says which checkpoint is intact.
llvm::Expected<std::string> saveCheckpointInDir(llvm::StringRef dir, const Module &forward,
                                                const Executor &ex, const Module &compiled,
                                                const CheckpointInfo &info,
                                                unsigned keep = kDefaultKeepCheckpoints);

llvm::Expected<std::string> saveCheckpointInDir(llvm::StringRef dir, const Module &forward,
                                                llvm::ArrayRef<NamedTensor> tensors,
                                                const Module &compiled, const CheckpointInfo &info,
                                                unsigned keep = kDefaultKeepCheckpoints);
/// A file, or a directory's `latest`: the checkpoint file to read. `latest`
/// must hold exactly one file name of the directory (and a newline).
llvm::Expected<std::string> resolveCheckpoint(llvm::StringRef pathOrDir);

struct LoadedCheckpoint {
  std::string path;                ///< the file read
  std::unique_ptr<Module> forward; ///< the model, variables carrying their saved values
  std::vector<NamedTensor> tensors;
  CheckpointInfo info;
};
/// Reads and checks one checkpoint file (strictly, as the file header says).
llvm::Expected<LoadedCheckpoint> loadCheckpointFile(llvm::StringRef path);
/// A checkpoint file, or the one a directory's `latest` names; a damaged one
/// is refused, naming the other step files of the directory.
llvm::Expected<LoadedCheckpoint> loadCheckpoint(llvm::StringRef pathOrDir);

/// For --resume: the newest checkpoint in `dir` that loads, passing over
/// damaged ones (each renamed to NAME.damaged, out of the rotation, with a
/// line in `notes`); std::nullopt when the directory holds no checkpoint yet.
llvm::Expected<std::optional<LoadedCheckpoint>> loadForResume(llvm::StringRef dir,
                                                              std::vector<std::string> &notes);

/// Copies the checkpoint's tensors into the executor's variables (strictly)
/// and sets its step counter.
llvm::Error restoreInto(const LoadedCheckpoint &ckpt, const Module &compiled, Executor &ex);

/// The kinds of optimizer slot ("momentum", "adam_m", ...) the checkpoint
/// holds and `compiled` has no use for: a run resumed with plain SGD from
/// another optimizer's checkpoint (which restoreInto allows, as evaluation
/// reads any checkpoint) drops that state, and says so.
std::set<std::string> unusedSlots(const LoadedCheckpoint &ckpt, const Module &compiled);

/// One process's part of a run whose variables live in several processes
/// (parameter-server tasks): checkFits against the whole plan before it is
/// cut, then restorePartInto writes the variables the part's executor holds
/// and sets its step counter.
llvm::Error checkFits(const LoadedCheckpoint &ckpt, const Module &plan);
llvm::Error restorePartInto(const LoadedCheckpoint &ckpt, Executor &ex);
/// Checks that a checkpoint directory can be written (before training starts).
llvm::Error checkWritableDir(llvm::StringRef dir);

} // namespace graphc
