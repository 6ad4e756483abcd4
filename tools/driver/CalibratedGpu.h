//===- CalibratedGpu.h - The calibrated figures of a model of GPU -*- C++ -*-===//
//
// `--gpus N` plans for N GPUs with the default cluster's H100-like figures,
// unless the model of GPU is known and a calibrated cluster of that model is
// kept: <folder>/<model>.json (calibratedClusterFileName: "NVIDIA H200" ->
// nvidia-h200.json), written by `graphrun calibrate` on such a GPU and
// committed. Then the plan's GPUs are N copies of the file's gpu:0, with its
// calibration (Cluster::ofCalibrated). The model is
//
//   --gpu-model NAME   that model; an error when no file is kept for it
//   --gpu-model auto   (the default) this machine's physical GPU 0's, when it
//                      has one and the run does not emulate its GPUs; a GPU
//                      without a file keeps the default figures, with a note
//   --gpu-model none   the default figures
//
// The folder is $GRAPHC_CLUSTERS, or the source tree's clusters/.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace graphc {

struct CalibratedGpu {
  std::string model; ///< the model looked up ("" with none)
  std::string file;  ///< its calibrated cluster file; empty: the default figures
  /// Why a model that was seen keeps the default figures (no file), or "".
  std::string note;
};

/// Where calibrated clusters are kept: $GRAPHC_CLUSTERS, or the source
/// tree's clusters/.
std::string calibratedClustersDir();

/// The calibrated cluster --gpu-model `flag` names (see above); `emulated`:
/// the run maps its GPUs onto CPU devices, so auto looks for no model. An
/// error names the model and the files that are kept.
llvm::Expected<CalibratedGpu> findCalibratedGpu(llvm::StringRef flag, bool emulated);

/// "cluster: GPUs of <model> with the calibrated figures of <file>" to `os`,
/// or "note: <why the default figures>" to stderr (a diagnostic, out of
/// what scripts read); nothing where no model was looked up.
void printCalibrated(const CalibratedGpu &found, llvm::raw_ostream &os);

} // namespace graphc
