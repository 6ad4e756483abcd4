//===- Placer.h - Assigning every node a device -----------------*- C++ -*-===//
//
// The placer turns requested devices (set by the user or by the tower passes)
// into assigned devices, in TensorFlow's manner: colocation groups, requests
// accumulated per group, kernel availability per device kind, and one error
// naming the node when no device fits. Kernel availability comes in as a
// callback so that placement depends on the IR only; the tools answer it from
// the kernel registry.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Cluster.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

namespace graphc {

/// Whether a node's op has a kernel on devices of a type.
using KernelAvailability = std::function<bool(const Node &, DeviceKind)>;

/// Every kernel everywhere: for tests and for clusters without a registry.
bool anyKernelAnywhere(const Node &, DeviceKind);

/// Ops the executor runs itself (storage, copies and collectives), for which
/// the placer never asks about kernels: Input, Variable, Constant, Transfer,
/// AllReduce.
bool runsWithoutKernel(Op op);

struct PlacerOptions {
  /// TensorFlow's allow_soft_placement: a node requested on a device whose
  /// kind has no kernel for it moves to a device that can run it (the host
  /// first) instead of failing. A request for a device that is not in the
  /// cluster is an error either way.
  bool softPlacement = true;
};

/// The placer's contract. For every node of every graph of a module:
///
///  1. The node gets exactly one assigned device, a device of the cluster,
///     and a short placement reason saying why.
///  2. Colocation: nodes of one colocation group (ColocationGroups.h: a
///     variable replica's reads, its updates and its optimizer slots;
///     `colocate_with`) get the same device.
///  3. Requests are honoured: a group whose members (or whose variables'
///     storage, Variable::devices) request a device goes there. A request
///     naming a device outside the cluster is an error that lists the visible
///     devices; two different requests in one group are an error naming both
///     nodes.
///  4. Kernels: a node is placed only on a device kind that can run every
///     member of its group. A requested device of a kind that cannot is, with
///     soft placement, replaced by the host (or, if the host cannot run the
///     group, the first device in cluster order that can), with that reason;
///     without soft placement it is an error. A group no device kind can run
///     is an error listing which kinds each member could use.
///  5. A group without a request follows its tower: tower t's device is the
///     device most requested by tower t's nodes (ties: cluster order), else
///     "gpu:t" when the cluster has it.
///  6. A group with neither request nor tower that holds an Input goes to the
///     host, which feeds inputs. Any other follows its inputs: the device
///     its already-placed producers send it the most bytes from (graph order);
///     failing that, its consumers, the device it sends the most bytes to
///     (reverse graph order); failing both, the host. Ties go to the device
///     first in cluster order, then to the lexically first neighbour's name,
///     so the choice does not depend on the order nodes were created in.
///  7. Variable::devices afterwards lists where each replica's storage lives,
///     i.e. the device of the replica's group; a variable no node uses keeps
///     its storage devices, or gets the host when it had none.
///
/// Errors name the node: "Cannot assign a device for operation 'X' (Op): ...".
/// The result is deterministic: the same module and cluster give the same
/// placement, and no decision follows pointer values.
class Placer {
public:
  Placer(const Cluster &cluster, KernelAvailability kernels, PlacerOptions opts = {})
      : cluster_(cluster), kernels_(std::move(kernels)), opts_(opts) {}

  /// Places every graph of the module.
  llvm::Error run(Module &m) const;
  /// Places one graph (Variable::devices of the variables it uses included).
  llvm::Error run(Graph &g) const;

private:
  const Cluster &cluster_;
  KernelAvailability kernels_;
  PlacerOptions opts_;
};

/// A function that places a module, for CompileOptions::placer: the cluster
/// and callback are copied into it.
std::function<llvm::Error(Module &)> makePlacerFunction(Cluster cluster, KernelAvailability kernels,
                                                        PlacerOptions opts = {});

/// `graphc place --explain`: one row per node (graph order) with its name, op,
/// requested device, assigned device and reason, in aligned columns.
void printPlacementExplanation(const Module &m, llvm::raw_ostream &os);

} // namespace graphc
