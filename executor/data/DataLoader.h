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
//  2. Shape. inputs is f32 [B, C, H, W] in the target shape, converted from
//     the data set's native shape as ShapeConversion.h says ([B, H, W, C]
//     with `channelsLast`, transposed by the workers); labels is i64
//     [B]. A tensor data set's (Dataset.h) are its layout's, unconverted:
//     [B, ...input] and [B, ...label]. Every batch has B rows; `samples` says how many are real. Only the
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
//  7. Parts. With `part` (one worker of several, passes/WorkerPart.h), the
//     loader hands out rows [offset, offset + count) of every global batch
//     of `batch` rows and loads only what they need. Put together, the
//     workers' parts are the batches one loader of the whole batch hands out
//     (1. and 6. hold for the global batch, skipped samples included), and
//     position() is that loader's, so a checkpoint resumes on any number of
//     workers. Each worker loads its rows' positions of the batch's window;
//     before handing the batch out, the workers combine which positions of
//     the window failed (orAcrossWorkers: one collective of `batch` bytes per
//     batch). None failed: the worker's chunk is its part, as loaded. Some
//     did: the window grows by the missing count, the growth split among the
//     workers as a batch's first rows are, until it holds `batch` good
//     samples (every worker knows which); each worker loads those of its
//     rows it does not hold yet (a few extra decodes per skipped sample), and
//     prefetching restarts after the window, keeping what it had loaded for
//     the chunks that now hold it. A part drops the short last batch
//     (dropLast) without loading it.
//
// One consumer thread calls startEpoch() and next(); stats() may be called
// from any thread.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "executor/data/Dataset.h"
#include "executor/data/ShapeConversion.h"
#include "ir/Tensor.h"

#include "llvm/ADT/ArrayRef.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace graphc {

/// One worker's rows of every global batch (point 7 above).
struct LoaderPart {
  int64_t offset = 0, count = 0;
  /// Combines every worker's flags in place, elementwise (logical or). A
  /// collective: every worker calls it at the same point, with the same length.
  std::function<llvm::Error(llvm::MutableArrayRef<uint8_t>)> orAcrossWorkers;
};

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
  /// Only these rows of every batch (several workers); unset: every row.
  std::optional<LoaderPart> part;
  /// Images as [B, H, W, C], for a channels-last model input.
  bool channelsLast = false;
};

/// How far the consumer is into an epoch: batches handed out, and positions
/// of the epoch's permutation consumed (skipped samples included).
struct LoaderPosition {
  int64_t batches = 0, samples = 0;
};

struct Batch {
  Tensor inputs; // f32 [B, C, H, W] images, or a tensor data set's [B, ...]
  Tensor labels; // i64 [B] classes, or a tensor data set's [B, ...]
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
  /// Samples this loader read and decoded (or tried to), those prefetched
  /// and not handed out included: a worker's part costs its share.
  int64_t loaded = 0;
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
  /// Positions [first, first + count) of the permutation.
  struct Span {
    int64_t first = 0, count = 0;
  };
  /// A sample loaded for a chunk that was not handed out because a part
  /// moved its chunks past skipped samples; kept by permutation position for
  /// the chunks that hold it now.
  struct Kept {
    std::vector<std::byte> input, label;
    std::string error; ///< empty: it loaded
  };
  /// Where one sample goes: its row of a batch's inputs and of its labels.
  struct SampleRef {
    std::byte *input, *label;
  };
  /// The samples of a span: chunk i holds a batch's window [anchor + i·B,
  /// anchor + (i + 1)·B), or this loader's part of it.
  struct Chunk {
    Tensor inputs, labels;
    int64_t first = 0, count = 0;
    std::vector<char> good;
    std::vector<std::string> errors; ///< one per bad slot, in slot order
  };
  /// What a worker needs to build chunk `index`, taken under mutex_.
  struct Claim {
    int64_t index = 0;
    Span span;
    uint64_t generation = 0, anchoring = 0;
    std::shared_ptr<const std::vector<int64_t>> order;
    std::map<int64_t, Kept> kept; ///< the span's kept samples
  };
  /// Per-thread buffers for loading and converting one sample.
  struct Scratch {
    std::vector<float> native, converted, plane, resize;
  };

  DataLoader(std::shared_ptr<const Dataset> data, const LoaderOptions &options,
             ShapeConversion conversion);
  void workerLoop();
  /// Under mutex_.
  Claim claimChunk(int64_t index);
  /// Loads and converts one sample into `dst`.
  llvm::Error loadSample(int64_t sample, SampleRef dst, Scratch &scratch) const;
  /// Row `row` of `inputs` and `labels` (a chunk's or a batch's).
  SampleRef rowOf(Tensor &inputs, Tensor &labels, int64_t row) const;
  /// A chunk's or a batch's empty tensors of `rows` rows.
  std::pair<Tensor, Tensor> batchTensors(int64_t rows) const;
  Chunk buildChunk(Claim &claim, Scratch &scratch) const;
  Chunk takeChunk(int64_t index);
  /// A finished chunk of the current epoch: ready_, or kept_ when the part's
  /// chunks have moved since it was claimed. Under mutex_.
  void deliver(const Claim &claim, Chunk chunk);
  /// Chunks from now on start at `anchor` (a permutation position), and
  /// `first` is the next one the consumer takes. A new epoch abandons the
  /// work queued before; a part moving past skips keeps what it loaded.
  void restartChunks(int64_t anchor, int64_t first, bool newEpoch);
  /// A part's chunks stop (before moving): ready ones are kept, none claimed.
  void retireChunks();
  /// The kept sample at `position`, if any, taken out of kept_.
  std::optional<Kept> takeKept(int64_t position);
  /// The sample at a permutation position, kept or loaded (consumer's thread).
  llvm::Error loadPosition(int64_t position, SampleRef dst);
  void countSkipped(int64_t skipped, std::vector<std::string> messages);
  /// The end of an epoch: an error when none of its samples could be loaded.
  llvm::Error checkEpochHadSamples();
  /// next() with a part (point 7).
  llvm::Expected<std::optional<Batch>> nextPart();
  /// Numbers a batch of `samples` samples, counts it and hands it out.
  std::optional<Batch> handOut(Batch out, int64_t samples);
  /// The batch after skipped samples: `failed` flags the window at `window`.
  llvm::Expected<std::optional<Batch>> partAfterSkips(int64_t window, Chunk chunk,
                                                      std::vector<uint8_t> failed);

  std::shared_ptr<const Dataset> data_;
  LoaderOptions options_;
  ShapeConversion conversion_;
  /// One sample, without the batch: the target image and a class label, or
  /// a tensor data set's layout.
  TensorLayout sample_;
  size_t inputBytes_ = 0, labelBytes_ = 0;
  int64_t rows_ = 0; ///< rows of a batch handed out: `batch`, or the part's
  mutable std::atomic<int64_t> loaded_{0};

  // Shared with the workers, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable workCv_, readyCv_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> generation_{0}; // bumped by startEpoch: abandons work
  uint64_t anchoring_ = 0;              // bumped when a part's chunks move
  bool started_ = false;
  std::shared_ptr<const std::vector<int64_t>> order_;
  int64_t nextClaim_ = 0, consumed_ = 0;
  int64_t anchor_ = 0;         // where chunk 0 starts: 0, or a part's last window end
  int64_t chunksPerEpoch_ = 0; // chunks to build from the anchor on
  std::map<int64_t, Chunk> ready_;
  std::map<int64_t, Kept> kept_;
  LoaderStats stats_;

  // The consumer's side.
  Scratch consumerScratch_;
  std::optional<Chunk> current_;
  int64_t currentSlot_ = 0, nextChunk_ = 0, batchIndex_ = 0;
  int64_t resumeSlot_ = 0; // where in its first chunk a resumed epoch starts
  int64_t epochGood_ = 0, epochSkipped_ = 0;
};

} // namespace graphc
