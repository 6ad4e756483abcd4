//===- DataLoader.cpp - Batches in the model's input shape ----------------===//
//
// Workers build chunks (one batch's worth of permutation positions, with a
// good/bad flag per sample) in any order; the consumer assembles batches
// from the chunks strictly in order. When a chunk has no bad sample and no
// earlier sample is pending, it is handed out as the batch without a copy;
// otherwise the good samples are copied into a fresh batch. Skipped samples
// are counted when the consumer takes their chunk, so counts do not depend
// on how far the workers ran ahead.
//
//===----------------------------------------------------------------------===//
#include "executor/data/DataLoader.h"

#include "ir/Diagnostics.h"
#include "ir/Random.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <utility>

namespace graphc {

namespace {

/// Key of the shuffle stream, apart from the keys data sets use.
constexpr uint64_t kShuffleKey = 0x53485546464c45ull;

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

llvm::Expected<std::unique_ptr<DataLoader>> DataLoader::create(std::shared_ptr<const Dataset> data,
                                                               const LoaderOptions &options) {
  assert(data && "a data set to load from");
  if (options.batch <= 0)
    return makeError("data loader: the batch size " + llvm::Twine(options.batch) +
                     " must be positive");
  if (options.threads < 0 || options.prefetch < 1)
    return makeError("data loader: " + llvm::Twine(options.threads) + " threads and prefetch " +
                     llvm::Twine(options.prefetch) +
                     " (threads must be at least 0, prefetch at least 1)");
  if (options.dropLast && data->size() < options.batch)
    return makeError(data->describe() + ": " + llvm::Twine(data->size()) +
                     " samples do not fill one batch of " + llvm::Twine(options.batch) +
                     " (and the short last batch is dropped)");
  LoaderOptions opts = options;
  if (opts.target == SampleShape{})
    opts.target = data->shape();
  auto conversion = ShapeConversion::create(data->shape(), data->normalization(), opts.target);
  if (!conversion)
    return withContext(conversion.takeError(), data->describe());
  std::unique_ptr<DataLoader> loader(new DataLoader(std::move(data), opts, *conversion));
  for (int t = 0; t < opts.threads; ++t)
    loader->workers_.emplace_back([l = loader.get()] { l->workerLoop(); });
  return loader;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> data, const LoaderOptions &options,
                       ShapeConversion conversion)
    : data_(std::move(data)), options_(options), conversion_(std::move(conversion)) {
  chunksPerEpoch_ = (data_->size() + options_.batch - 1) / options_.batch;
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  workCv_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

int64_t DataLoader::batchesPerEpoch() const {
  return options_.dropLast ? data_->size() / options_.batch : chunksPerEpoch_;
}

LoaderStats DataLoader::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

LoaderPosition DataLoader::position() const {
  const int64_t batch = options_.batch;
  int64_t samples = current_ ? (nextChunk_ - 1) * batch + currentSlot_
                             : std::min(nextChunk_ * batch + resumeSlot_, data_->size());
  return {batchIndex_, samples};
}

void DataLoader::startEpoch(int64_t epoch, LoaderPosition at) {
  assert(at.samples >= 0 && at.samples <= data_->size() && at.batches >= 0 &&
         "a position of this data set");
  auto order = std::make_shared<std::vector<int64_t>>(data_->size());
  std::iota(order->begin(), order->end(), 0);
  if (options_.shuffle) {
    RandomStream rng(options_.seed, kShuffleKey + (uint64_t)epoch);
    for (int64_t i = (int64_t)order->size() - 1; i > 0; --i)
      std::swap((*order)[i], (*order)[rng.next() % (uint64_t)(i + 1)]);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    started_ = true;
    order_ = std::move(order);
    ready_.clear();
    nextClaim_ = consumed_ = at.samples / options_.batch;
  }
  workCv_.notify_all();
  current_.reset();
  currentSlot_ = 0;
  nextChunk_ = at.samples / options_.batch;
  resumeSlot_ = at.samples % options_.batch;
  batchIndex_ = at.batches;
  // Batches already handed out held good samples only.
  epochGood_ = at.batches * options_.batch;
  epochSkipped_ = 0;
}

DataLoader::Chunk DataLoader::buildChunk(int64_t index, const std::vector<int64_t> &order,
                                         uint64_t generation, Scratch &scratch) const {
  const int64_t batch = options_.batch, elems = options_.target.numElements();
  const SampleShape &t = options_.target;
  Chunk c;
  c.count = std::min(batch, data_->size() - index * batch);
  c.images = Tensor(TensorType(DType::F32, {batch, t.channels, t.height, t.width}));
  c.labels = Tensor(TensorType(DType::I64, {batch}));
  c.good.assign(c.count, 0);
  if (!conversion_.isIdentity())
    scratch.native.resize(conversion_.from().numElements());
  float *images = c.images.data<float>();
  int64_t *labels = c.labels.data<int64_t>();
  for (int64_t slot = 0; slot < c.count; ++slot) {
    // Abandoned (a new epoch, or shutdown): the result will be discarded.
    if (stopping_ || generation_ != generation)
      break;
    float *dst = images + slot * elems;
    int64_t sample = order[index * batch + slot], label = 0;
    // Straight into the batch when no conversion is needed.
    bool direct = conversion_.isIdentity();
    llvm::Error err = data_->load(sample, direct ? dst : scratch.native.data(), label);
    if (!err && !direct)
      conversion_.convert(scratch.native.data(), dst, scratch.plane, scratch.resize);
    if (err) {
      c.errors.push_back(llvm::toString(std::move(err)));
      std::fill(dst, dst + elems, 0.0f);
      continue;
    }
    assert(label >= 0 && label < data_->numClasses() && "data sets give labels in range");
    labels[slot] = label;
    c.good[slot] = 1;
  }
  return c;
}

void DataLoader::workerLoop() {
  Scratch scratch;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    workCv_.wait(lock, [&] {
      return stopping_ || (started_ && nextClaim_ < chunksPerEpoch_ &&
                           nextClaim_ < consumed_ + options_.prefetch);
    });
    if (stopping_)
      return;
    int64_t index = nextClaim_++;
    uint64_t generation = generation_;
    std::shared_ptr<const std::vector<int64_t>> order = order_;
    lock.unlock();
    Chunk chunk = buildChunk(index, *order, generation, scratch);
    lock.lock();
    if (generation == generation_ && !stopping_) {
      ready_.emplace(index, std::move(chunk));
      readyCv_.notify_all();
    }
  }
}

DataLoader::Chunk DataLoader::takeChunk(int64_t index) {
  auto start = std::chrono::steady_clock::now();
  Chunk chunk;
  if (workers_.empty()) {
    std::shared_ptr<const std::vector<int64_t>> order;
    uint64_t generation = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      order = order_;
      generation = generation_;
    }
    chunk = buildChunk(index, *order, generation, consumerScratch_);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.waitSeconds += secondsSince(start);
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = ready_.find(index);
    if (it == ready_.end()) {
      readyCv_.wait(lock, [&] { return ready_.count(index) != 0; });
      stats_.waitSeconds += secondsSince(start);
      it = ready_.find(index);
    }
    chunk = std::move(it->second);
    ready_.erase(it);
    consumed_ = index + 1;
  }
  workCv_.notify_all();

  int64_t good = std::count(chunk.good.begin(), chunk.good.end(), 1);
  epochGood_ += good;
  epochSkipped_ += chunk.count - good;
  if (!chunk.errors.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.skipped += (int64_t)chunk.errors.size();
    for (std::string &msg : chunk.errors)
      if (stats_.firstSkipped.size() < LoaderStats::kReported &&
          std::find(stats_.firstSkipped.begin(), stats_.firstSkipped.end(), msg) ==
              stats_.firstSkipped.end())
        stats_.firstSkipped.push_back(std::move(msg));
  }
  return chunk;
}

llvm::Expected<std::optional<Batch>> DataLoader::next() {
  // Only this thread writes started_, so it may read it without the lock.
  if (!started_)
    startEpoch(0);
  const int64_t batch = options_.batch, elems = options_.target.numElements();
  Batch out;
  int64_t filled = 0;
  while (filled < batch) {
    if (!current_ || currentSlot_ == current_->count) {
      if (nextChunk_ == chunksPerEpoch_)
        break;
      current_ = takeChunk(nextChunk_++);
      currentSlot_ = std::exchange(resumeSlot_, 0);
      // The common case: a whole chunk of good samples is the batch as it is.
      if (filled == 0 && currentSlot_ == 0 && current_->errors.empty() &&
          (current_->count == batch || !options_.dropLast)) {
        out.images = std::move(current_->images);
        out.labels = std::move(current_->labels);
        filled = current_->count;
        current_.reset();
        break;
      }
      if (currentSlot_ == current_->count) // resumed past the chunk's last sample
        continue;
    }
    if (current_->good[currentSlot_]) {
      if (out.images.empty()) {
        out.images = Tensor(current_->images.type());
        out.labels = Tensor(current_->labels.type());
      }
      std::memcpy(out.images.data<float>() + filled * elems,
                  current_->images.data<float>() + currentSlot_ * elems, sizeof(float) * elems);
      out.labels.data<int64_t>()[filled] = current_->labels.data<int64_t>()[currentSlot_];
      ++filled;
    }
    ++currentSlot_;
  }

  if (filled == 0 && epochGood_ == 0 && epochSkipped_ > 0) {
    std::string first;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stats_.firstSkipped.empty())
        first = stats_.firstSkipped.front();
    }
    return makeError(data_->describe() + ": none of the " + llvm::Twine(epochSkipped_) +
                     " samples of the epoch could be loaded; the first: " + first);
  }
  if (filled == 0 || (filled < batch && options_.dropLast))
    return std::nullopt;
  out.samples = filled;
  out.index = batchIndex_++;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.batches;
  stats_.samples += filled;
  return std::optional<Batch>(std::move(out));
}

} // namespace graphc
