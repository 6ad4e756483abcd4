//===- Tasks.h - The processes of a run, by role ------------------*- C++ -*-===//
//
// A run of several processes is a cluster of tasks with TensorFlow's roles:
//   chief   the worker that prints progress, writes checkpoints and metrics,
//           and evaluates (without a chief entry, worker 0 is the chief);
//   worker  trains its towers on its part of every global batch;
//   ps      a parameter-server task: holds a shard of the variables.
// A task has a host (where mpirun starts it: the transport is MPI, so an
// address only documents its host) and, for chief and workers, GPUs (one
// tower each; a cluster whose training tasks have no GPU gives each one
// tower on its host). Not to be confused with Cluster.h, which describes the
// devices one placement sees (--cluster).
//
// Ranks. MPI rank r runs tasks()[r], in this order: the chief, the workers
// as listed, the ps tasks as listed. So the training tasks ("workers" in
// the executor and in plans) are ranks 0 .. numWorkers()-1, the chief is
// rank 0, and ps task p is rank numWorkers() + p.
//
// Sources: `--workers W --ps P --gpus D` (uniform), a cluster file or a
// TF_CONFIG (parseTasksJson):
//
//   {"chief":  [{"host": "node0", "gpus": 2}],
//    "worker": [{"host": "node1", "gpus": 1}, "node2:2222"],
//    "ps":     ["node3:2222"]}
//
//   {"cluster": {"chief": ["node0:2222"], "worker": ["node1:2222"], "ps": [...]},
//    "task": {"type": "worker", "index": 0}}
//
// An entry is an address "host[:port]" or an object {"host", "gpus"}; a
// training task without "gpus" gets the caller's default (--gpus). TF_CONFIG's
// "task" must name a task of the cluster, but the rank decides which task a
// process runs, so one TF_CONFIG serves every rank of `mpirun`.
//
// A cluster that exists is valid: roles chief (at most one), worker and ps
// only; at least one training task; hosts non-empty and printable; GPUs a
// whole number below Cluster::kMaxDevices, on training tasks only; every
// training task with GPUs or none. Errors are one line naming the source and
// the entry ("hosts.json: worker[1]: field 'gpus' must be ...").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace graphc {

enum class TaskRole : unsigned char { Chief, Worker, Ps };
/// "chief", "worker", "ps".
llvm::StringRef taskRoleName(TaskRole r);

struct Task {
  TaskRole role = TaskRole::Worker;
  unsigned index = 0; ///< among the tasks of its role, as listed
  std::string host;   ///< "node1" ("localhost" for uniform clusters)
  unsigned gpus = 0;  ///< chief and workers; 0: one tower on the host
};

class TaskCluster {
public:
  /// `workers` training tasks (worker 0 the chief) with `gpus` GPUs each, and
  /// `ps` parameter-server tasks, all on "localhost". workers >= 1.
  static TaskCluster uniform(unsigned workers, unsigned ps, unsigned gpus);
  /// Validates `tasks` (any order) and orders them by rank.
  static llvm::Expected<TaskCluster> create(std::vector<Task> tasks);

  /// In rank order.
  llvm::ArrayRef<Task> tasks() const { return tasks_; }
  /// Chief and workers: ranks 0 .. numWorkers()-1.
  unsigned numWorkers() const { return workers_; }
  unsigned numPs() const { return (unsigned)tasks_.size() - workers_; }
  const Task &ofRank(unsigned rank) const { return tasks_[rank]; }
  /// The training tasks' GPU counts, by rank.
  std::vector<unsigned> workerGpus() const;
  /// Whether the training tasks have GPUs (all of them do, or none).
  bool hasGpus() const { return workers_ > 0 && tasks_.front().gpus > 0; }
  /// "worker 1 on node2" (for messages and reports).
  std::string describe(unsigned rank) const;

private:
  std::vector<Task> tasks_;
  unsigned workers_ = 0;
};

/// Parses a cluster file or a TF_CONFIG (forms above); a training task
/// without "gpus" gets `defaultGpus`. Errors name the entry, not the source.
llvm::Expected<TaskCluster> parseTasksJson(llvm::StringRef text, unsigned defaultGpus);
/// Reads and parses a file; errors start with the path.
llvm::Expected<TaskCluster> loadTasksFile(llvm::StringRef path, unsigned defaultGpus);
/// The cluster of the TF_CONFIG environment variable, if it is set (and not
/// empty); errors start with "TF_CONFIG".
llvm::Expected<std::optional<TaskCluster>> tasksFromEnvironment(unsigned defaultGpus);

/// The cluster-file form, every field written (parseTasksJson reads it back
/// to the same cluster); what a plan records.
std::string tasksToJson(const TaskCluster &c);

} // namespace graphc
