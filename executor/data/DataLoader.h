//===- DataLoader.h - Batches in the model's input shape ---------*- C++ -*-===//
//
// Turns a Dataset into batches for `graphrun train` and `graphrun eval`.
// What it guarantees:
//
//  1. Order. Each epoch visits every sample once, in a permutation drawn from
//     (seed, epoch) when shuffling, else in index order. Batch i holds the
//     samples at positions [i·B, (i+1)·B) of that permutation; when a sample
//     cannot be loaded it is skipped and the batch is filled with the next
//     good samples in permutation order. The batches (contents, order, and
//     the skip count) are therefore the same for any number of threads and
//     any prefetch depth.
//  2. Shape. images is f32 [B, C, H, W] in the target shape, converted from
//     the data set's native shape as ShapeConversion.h says; labels is i64
//     [B]. Every batch has B rows; `samples` says how many are real. Only the
//     last batch of an epoch can be short (and only with dropLast = false);
//     its remaining rows are zeros with label 0, and the caller decides what
//     to do with it.
//  3. Prefetch. `threads` background workers each build whole batches, at
//     most `prefetch` batches ahead of the consumer (a bounded queue, so
//     memory stays at about prefetch batches). threads = 0 loads inside next().
//  4. Accounting. stats() counts batches and samples handed out, samples
//     skipped (with the first few messages, each naming the file), and the
//     time next() spent waiting for data: when that time is a large part of a
//     step, the input pipeline is the bottleneck.
//  5. Shutdown. startEpoch() mid-epoch and the destructor abandon queued and
//     in-flight work; workers stop between samples and are joined.
//  6. Position. position() says how far the consumer is into the epoch, and
//     startEpoch(epoch, position) starts there: the batches that follow are
//     those an uninterrupted loader would have handed out (resuming training
//     from a checkpoint).
//
// One consumer thread calls startEpoch() and next(); stats() may be called
// from any thread.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"
#include "executor/data/ShapeConversion.h"
#include "ir/Tensor.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace graphc {

struct LoaderOptions {
  int64_t batch = 32;
  /// The model's input shape; all zeros means the data set's own shape.
  SampleShape target;
  bool shuffle = true;
  uint64_t seed = 0;
  /// Drop a short last batch instead of returning it.
  bool dropLast = true;
  /// Batches prepared ahead of the consumer (at least 1).
  int prefetch = 4;
  /// Background workers; 0 loads on the consumer's thread inside next().
  int threads = 2;
};

/// How far the consumer is into an epoch: batches handed out, and positions
/// of the epoch's permutation consumed (skipped samples included).
struct LoaderPosition {
  int64_t batches = 0, samples = 0;
};

struct Batch {
  Tensor images; // f32 [B, C, H, W]
  Tensor labels; // i64 [B]
  int64_t samples = 0;
  int64_t index = 0; // the batch's number within its epoch
};

struct LoaderStats {
  static constexpr size_t kReported = 5;
  int64_t batches = 0, samples = 0;
  /// Samples skipped because they could not be loaded, and the first few
  /// distinct messages.
  int64_t skipped = 0;
  std::vector<std::string> firstSkipped;
  /// Seconds next() spent waiting for a batch that was not ready.
  double waitSeconds = 0;
};

class DataLoader {
public:
  static llvm::Expected<std::unique_ptr<DataLoader>> create(std::shared_ptr<const Dataset> data,
                                                            const LoaderOptions &options);
  ~DataLoader();
  DataLoader(const DataLoader &) = delete;
  DataLoader &operator=(const DataLoader &) = delete;

  /// Starts (or restarts) epoch `epoch` at `at` (a position() of that epoch;
  /// its beginning by default), abandoning the rest of the current one.
  /// next() before any startEpoch() starts epoch 0.
  void startEpoch(int64_t epoch, LoaderPosition at = {});
  /// The consumer's position in the current epoch.
  LoaderPosition position() const;
  /// The next batch, or nullopt at the end of the epoch. An error only when
  /// no sample of the epoch could be loaded.
  llvm::Expected<std::optional<Batch>> next();

  LoaderStats stats() const;
  /// Batches in an epoch in which every sample loads.
  int64_t batchesPerEpoch() const;
  const Dataset &dataset() const { return *data_; }
  const LoaderOptions &options() const { return options_; }

private:
  /// The samples at positions [index·B, index·B + count) of the permutation.
  struct Chunk {
    Tensor images, labels;
    int64_t count = 0;
    std::vector<char> good;
    std::vector<std::string> errors;
  };
  /// Per-thread buffers for loading and converting one sample.
  struct Scratch {
    std::vector<float> native, plane, resize;
  };

  DataLoader(std::shared_ptr<const Dataset> data, const LoaderOptions &options,
             ShapeConversion conversion);
  void workerLoop();
  Chunk buildChunk(int64_t index, const std::vector<int64_t> &order, uint64_t generation,
                   Scratch &scratch) const;
  Chunk takeChunk(int64_t index);

  std::shared_ptr<const Dataset> data_;
  LoaderOptions options_;
  ShapeConversion conversion_;
  int64_t chunksPerEpoch_ = 0;

  // Shared with the workers, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable workCv_, readyCv_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> generation_{0}; // bumped by startEpoch: abandons work
  bool started_ = false;
  std::shared_ptr<const std::vector<int64_t>> order_;
  int64_t nextClaim_ = 0, consumed_ = 0;
  std::map<int64_t, Chunk> ready_;
  LoaderStats stats_;

  // The consumer's side.
  Scratch consumerScratch_;
  std::optional<Chunk> current_;
  int64_t currentSlot_ = 0, nextChunk_ = 0, batchIndex_ = 0;
  int64_t resumeSlot_ = 0; // where in its first chunk a resumed epoch starts
  int64_t epochGood_ = 0, epochSkipped_ = 0;
};

} // namespace graphc
