//===- ElasticLaunch.h - A job that restarts on the workers still alive -*- C++ -*-===//
//
// `graphrun launch --hostfile HOSTS --elastic MIN:MAX -- TRAIN-ARGS...` supervises a
// multi-worker training job (issue 33, point 3), as Horovod Elastic's driver and torchrun's
// elastic agent do, with mpirun underneath:
//
//   1. Which hosts answer: `mpirun --host NAME:1 -np 1 true` per hostfile line, killed after
//      --probe-timeout (a host cut off never answers; mpirun would wait for its daemon).
//   2. A segment: `mpirun --hostfile SEGMENT -np W graphrun train TRAIN-ARGS --resume` (with
//      Open MPI's keepalive set to notice a lost host in seconds), W the
//      answering hosts' slots, in the hostfile's order, at most MAX; fewer than MIN ends the
//      launch with one error line. graphrun takes the world size from mpirun (WorldSize.h) and
//      compiles the plan for W workers with the same global batch (--batch), so each worker's
//      part grows or shrinks and the update stays the one of the whole batch; --resume picks the
//      newest checkpoint, which loads on any number of workers.
//   3. A segment that exits 0 ends the launch. One that fails (a rank killed, a host lost: the
//      ranks' collectives and the launcher end it within --collective-timeout, "Host failures"
//      in docs/multi-worker.md) is followed by the next, from step 1, after at most
//      --max-restarts restarts. A host that answers again is taken in at the next restart.
//   4. Each segment and restart is printed (`graphrun launch: segment 2: 2 workers on node0
//      (2) from step 140; node1 did not answer`, `restart 1: N steps to redo ...`) and, with
//      --metrics FILE.jsonl among the training flags, appended there as a record of kind
//      "segment" (workers, hosts, first and last step, exit status, seconds, seconds of
//      steps), between the steps' records of the segments. From those records each restart's
//      cost is printed once the next segment ends: the steps redone, the time between the
//      segments, and the new segment's time outside its steps (start-up, checkpoints, its end).
//
// Left to later: growing the job while it runs (a returning host waits for the next failure),
// and a supervisor that survives its own host's loss (it runs where mpirun runs).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace graphc {

struct HostSlots {
  std::string name;
  unsigned slots = 1;
};

struct ElasticOptions {
  std::string hostfile;
  unsigned minWorkers = 1, maxWorkers = 1;
  /// mpirun and the arguments it takes before the hostfile (a test harness's agent, MCA).
  std::vector<std::string> mpirun{"mpirun"};
  std::string graphrun;               ///< this binary
  std::vector<std::string> trainArgs; ///< after `train`
  unsigned maxRestarts = 10;
  double probeTimeout = 10;
};

/// "MIN:MAX" (or "N" for N:N): 1 <= MIN <= MAX.
llvm::Error parseElasticRange(llvm::StringRef text, unsigned &min, unsigned &max);
/// A hostfile's lines "NAME [slots=N] [max_slots=N]" (# comments, blank lines; max_slots,
/// Open MPI's, is accepted and not used: a segment takes `slots`); an error names the line.
llvm::Expected<std::vector<HostSlots>> parseHostfile(llvm::StringRef text, llvm::StringRef path);
/// The answering hosts' slots, in order, at most `max` workers in all.
std::vector<HostSlots> segmentHosts(llvm::ArrayRef<HostSlots> answering, unsigned max);
/// The training flags' --checkpoint and --metrics; refuses --workers (each segment's
/// workers are its processes) and a checkpoint directory that is missing.
llvm::Error readTrainFlags(llvm::ArrayRef<std::string> train, std::string &checkpointDir,
                           std::string &metrics);

/// Runs segments until one succeeds; returns the exit status of the launch.
llvm::Expected<int> runElastic(const ElasticOptions &o, llvm::raw_ostream &out);

} // namespace graphc
