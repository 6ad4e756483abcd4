//===- TrainingData.h - The data a model trains and evaluates on -*- C++ -*-===//
//
// A data set opened for a forward model: shaped for its data input (images
// [N, C, H, W] or [N, H, W, C], flat samples [N, F], or an npz data set's
// tensors of any shape and type), with labels that fit its loss (classes
// within its logits, or mse's float targets), and the loader options that
// feed it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/DataLoader.h"
#include "ir/Module.h"
#include "tools/driver/TrainOptions.h"

#include <memory>

namespace graphc {

/// The logits width of a forward model (its first output).
llvm::Expected<int64_t> numClasses(const Module &forward);

/// The image sample an input takes: [N, C, H, W], [N, H, W, C] (channels
/// last: 1 or 3 channels at axis 3 and not at axis 1), or flat [N, F] as
/// 1 × 1 × F; nullopt for other ranks.
std::optional<SampleShape> imageShapeOf(const TensorType &input);
bool isChannelsLast(const TensorType &input);

/// The data set `spec` (executor/data) split `split` for `forward`'s input;
/// an error when its labels would not fit the logits.
llvm::Expected<std::shared_ptr<const Dataset>> openDatasetFor(const Module &forward,
                                                              llvm::StringRef spec, Split split,
                                                              const SyntheticData &synthetic,
                                                              uint64_t seed);

/// A loader of `ds` for `forward`: shuffled and dropping a short last batch
/// in training, every sample in order otherwise.
LoaderOptions loaderOptionsFor(const Module &forward, const Dataset &ds, int64_t batch, bool train,
                               uint64_t seed, int threads);

/// Names the data a run reads, as its checkpoints record it: the data order
/// depends on it (the synthetic set's size and classes included).
std::string dataIdentity(const TrainOptions &opts);

/// The --data a dataIdentity names (a checkpoint's), with the synthetic
/// set's size and classes set in `synthetic` where not given already.
std::string dataOfIdentity(llvm::StringRef identity, SyntheticData &synthetic);

} // namespace graphc
