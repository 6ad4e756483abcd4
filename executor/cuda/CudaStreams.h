//===- CudaStreams.h - A CUDA device's streams and what runs on them -*- C++ -*-===//
//
// Each logical GPU device issues on its own streams (several logical devices
// on one physical GPU run side by side, like separate processes would):
//
//   compute     kernels; copies within the device (a prefetched input moved
//               into its step buffer)
//   copy-in     copies into the device within a step: host-to-device from
//               pinned staging, peer copies from other GPUs, device copies
//               from another logical device on the same GPU
//   collective  all-reduce (NCCL, or the project's own reduction kernel)
//   marker      no work: waits for the other streams so that one event marks
//               "everything issued so far" (Device::record) without making
//               compute wait for copies it does not need
//   copy-out    outside the hazard tracking: blocking reads by host devices
//               (readToHost) and blocking copyIn/copyOut outside steps
//   prefetch    the next step's inputs (Executor::prefetch)
//
// The first four are the streams of StreamHazards, in this order; trace
// tracks are named after the streams that carry timed work within a step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace graphc {

enum class CudaStream : unsigned { Compute, CopyIn, Collective, Marker, CopyOut, Prefetch };
/// Streams ordered by StreamHazards (Compute .. Marker).
constexpr unsigned kTrackedCudaStreams = 4;
constexpr unsigned kCudaStreams = 6;

llvm::StringRef cudaStreamName(CudaStream s);

/// Where the bytes a CUDA device receives within a step come from.
enum class CopySource { Host, SameDevice, SamePhysicalGpu, OtherGpu };
/// The stream such a copy is issued on (by the receiving device).
CudaStream streamForReceive(CopySource from);

/// Trace track names of a CUDA device: the streams that carry timed work
/// (compute, copy-in, collective). LaunchTiming::stream indexes this list;
/// the executor's copy track (feeds) is the second.
std::vector<std::string> cudaTraceStreams();
/// A stream's index in cudaTraceStreams(), or -1 for streams without tracks.
int cudaTraceStreamIndex(CudaStream s);

} // namespace graphc
