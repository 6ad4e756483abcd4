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
// With a part, a chunk is the part's positions of one batch's window, and
// nextPart() settles the window with the other workers (the header's point
// 7); after skips it re-anchors the chunks at the window's end.
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
  if (const std::optional<LoaderPart> &p = options.part) {
    if (p->offset < 0 || p->count < 1 || p->offset + p->count > options.batch)
      return makeError("data loader: rows " + llvm::Twine(p->offset) + ".." +
                       llvm::Twine(p->offset + p->count - 1) + " are not a part of a batch of " +
                       llvm::Twine(options.batch));
    if (!options.dropLast || !p->orAcrossWorkers)
      return makeError("data loader: a part of the batch drops the short last batch and "
                       "combines its flags with the other workers'");
  }
  if (options.dropLast && data->size() < options.batch)
    return makeError(data->describe() + ": " + llvm::Twine(data->size()) +
                     " samples do not fill one batch of " + llvm::Twine(options.batch) +
                     " (and the short last batch is dropped)");
  LoaderOptions opts = options;
  if (opts.target == SampleShape{} || data->tensorLayout())
    opts.target = data->shape(); // a tensor data set's samples go as they are
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
  rows_ = options_.part ? options_.part->count : options_.batch;
  const SampleShape &t = options_.target;
  options_.channelsLast &= !data_->tensorLayout();
  sample_ = data_->tensorLayout().value_or(TensorLayout{
      TensorType(DType::F32, options_.channelsLast ? Dims{t.height, t.width, t.channels}
                                                   : Dims{t.channels, t.height, t.width}),
      TensorType(DType::I64, {})});
  inputBytes_ = sample_.input.bytes();
  labelBytes_ = sample_.label.bytes();
}

std::pair<Tensor, Tensor> DataLoader::batchTensors(int64_t rows) const {
  auto batched = [rows](const TensorType &t) {
    Dims dims{rows};
    dims.append(t.shape.begin(), t.shape.end());
    return Tensor(TensorType(t.dtype, dims));
  };
  return {batched(sample_.input), batched(sample_.label)};
}

DataLoader::SampleRef DataLoader::rowOf(Tensor &inputs, Tensor &labels, int64_t row) const {
  return {static_cast<std::byte *>(inputs.raw()) + row * inputBytes_,
          static_cast<std::byte *>(labels.raw()) + row * labelBytes_};
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
  const int64_t n = data_->size(), batch = options_.batch;
  return options_.dropLast ? n / batch : (n + batch - 1) / batch;
}

LoaderStats DataLoader::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LoaderStats s = stats_;
  s.loaded = loaded_;
  return s;
}

LoaderPosition DataLoader::position() const {
  const int64_t batch = options_.batch;
  if (options_.part)
    return {batchIndex_, std::min(anchor_ + nextChunk_ * batch, data_->size())};
  int64_t samples = current_ ? (nextChunk_ - 1) * batch + currentSlot_
                             : std::min(nextChunk_ * batch + resumeSlot_, data_->size());
  return {batchIndex_, samples};
}

void DataLoader::restartChunks(int64_t anchor, int64_t first, bool newEpoch) {
  const int64_t n = data_->size(), batch = options_.batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (newEpoch) {
      ++generation_;
      kept_.clear();
    }
    ready_.clear();
    anchor_ = anchor;
    // A part builds only windows that can fill a batch (it drops the short
    // last one); a whole batch builds the epoch's tail too.
    chunksPerEpoch_ = options_.part ? (n - anchor) / batch : (n - anchor + batch - 1) / batch;
    nextClaim_ = consumed_ = first;
    kept_.erase(kept_.begin(), kept_.lower_bound(anchor));
  }
  workCv_.notify_all();
}

void DataLoader::retireChunks() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++anchoring_;
  for (auto &[index, chunk] : ready_)
    deliver(Claim{index, {chunk.first, chunk.count}, generation_, anchoring_ - 1, nullptr, {}},
            std::move(chunk));
  ready_.clear();
  chunksPerEpoch_ = nextClaim_ = consumed_ = 0;
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
    started_ = true;
    order_ = std::move(order);
  }
  current_.reset();
  currentSlot_ = 0;
  if (options_.part) {
    // A part's chunks start where the epoch resumes.
    nextChunk_ = resumeSlot_ = 0;
    restartChunks(at.samples, 0, /*newEpoch=*/true);
  } else {
    nextChunk_ = at.samples / options_.batch;
    resumeSlot_ = at.samples % options_.batch;
    restartChunks(0, nextChunk_, /*newEpoch=*/true);
  }
  batchIndex_ = at.batches;
  // Batches already handed out held good samples only.
  epochGood_ = at.batches * options_.batch;
  epochSkipped_ = 0;
}

DataLoader::Claim DataLoader::claimChunk(int64_t index) {
  const int64_t window = anchor_ + index * options_.batch, n = data_->size();
  Claim c;
  c.index = index;
  if (options_.part) {
    c.span.first = std::min(window + options_.part->offset, n);
    c.span.count = std::min(options_.part->count, n - c.span.first);
  } else {
    c.span = {window, std::min(options_.batch, n - window)};
  }
  c.generation = generation_;
  c.anchoring = anchoring_;
  c.order = order_;
  auto from = kept_.lower_bound(c.span.first), to = kept_.lower_bound(c.span.first + c.span.count);
  c.kept.insert(std::make_move_iterator(from), std::make_move_iterator(to));
  kept_.erase(from, to);
  return c;
}

llvm::Error DataLoader::loadSample(int64_t sample, SampleRef dst, Scratch &scratch) const {
  ++loaded_;
  if (data_->tensorLayout())
    return data_->loadTensor(sample, dst.input, dst.label);
  int64_t label = 0;
  auto *row = reinterpret_cast<float *>(dst.input);
  // Straight into the batch when neither a conversion nor the transposition
  // to channels last is needed.
  const SampleShape &to = conversion_.to();
  float *pixels = row;
  if (options_.channelsLast && to.channels > 1) {
    scratch.converted.resize(to.numElements());
    pixels = scratch.converted.data();
  }
  if (conversion_.isIdentity()) {
    if (auto err = data_->load(sample, pixels, label))
      return err;
  } else {
    scratch.native.resize(conversion_.from().numElements());
    if (auto err = data_->load(sample, scratch.native.data(), label))
      return err;
    conversion_.convert(scratch.native.data(), pixels, scratch.plane, scratch.resize);
  }
  if (pixels != row)
    toChannelsLast(pixels, row, to);
  assert(label >= 0 && label < data_->numClasses() && "data sets give labels in range");
  std::memcpy(dst.label, &label, sizeof label);
  return llvm::Error::success();
}

DataLoader::Chunk DataLoader::buildChunk(Claim &claim, Scratch &scratch) const {
  Chunk c;
  c.first = claim.span.first;
  c.count = claim.span.count;
  std::tie(c.inputs, c.labels) = batchTensors(rows_);
  c.good.assign(c.count, 0);
  for (int64_t slot = 0; slot < c.count; ++slot) {
    // Abandoned (a new epoch, or shutdown): the result will be discarded.
    if (stopping_ || generation_ != claim.generation)
      break;
    SampleRef dst = rowOf(c.inputs, c.labels, slot);
    std::string error;
    if (auto kept = claim.kept.find(c.first + slot); kept != claim.kept.end()) {
      llvm::copy(kept->second.input, dst.input);
      llvm::copy(kept->second.label, dst.label);
      error = std::move(kept->second.error);
    } else if (llvm::Error err = loadSample((*claim.order)[c.first + slot], dst, scratch)) {
      error = llvm::toString(std::move(err));
    }
    if (!error.empty()) {
      c.errors.push_back(std::move(error));
      std::fill_n(dst.input, inputBytes_, std::byte{0});
      std::fill_n(dst.label, labelBytes_, std::byte{0});
      continue;
    }
    c.good[slot] = 1;
  }
  return c;
}

void DataLoader::deliver(const Claim &claim, Chunk chunk) {
  if (claim.generation != generation_ || stopping_)
    return;
  if (claim.anchoring == anchoring_) {
    ready_.emplace(claim.index, std::move(chunk));
    readyCv_.notify_all();
    return;
  }
  size_t bad = 0;
  for (int64_t slot = 0; slot < chunk.count; ++slot) {
    Kept k;
    if (chunk.good[slot]) {
      SampleRef row = rowOf(chunk.inputs, chunk.labels, slot);
      k.input.assign(row.input, row.input + inputBytes_);
      k.label.assign(row.label, row.label + labelBytes_);
    } else {
      k.error = chunk.errors[bad++];
    }
    if (chunk.first + slot >= anchor_)
      kept_[chunk.first + slot] = std::move(k);
  }
}

std::optional<DataLoader::Kept> DataLoader::takeKept(int64_t position) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kept_.find(position);
  if (it == kept_.end())
    return std::nullopt;
  Kept k = std::move(it->second);
  kept_.erase(it);
  return k;
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
    Claim claim = claimChunk(nextClaim_++);
    lock.unlock();
    Chunk chunk = buildChunk(claim, scratch);
    lock.lock();
    deliver(claim, std::move(chunk));
  }
}

DataLoader::Chunk DataLoader::takeChunk(int64_t index) {
  auto start = std::chrono::steady_clock::now();
  Chunk chunk;
  if (workers_.empty()) {
    Claim claim;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      claim = claimChunk(index);
    }
    chunk = buildChunk(claim, consumerScratch_);
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
  return chunk;
}

void DataLoader::countSkipped(int64_t skipped, std::vector<std::string> messages) {
  epochSkipped_ += skipped;
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.skipped += skipped;
  for (std::string &msg : messages)
    if (stats_.firstSkipped.size() < LoaderStats::kReported &&
        std::find(stats_.firstSkipped.begin(), stats_.firstSkipped.end(), msg) ==
            stats_.firstSkipped.end())
      stats_.firstSkipped.push_back(std::move(msg));
}

llvm::Error DataLoader::checkEpochHadSamples() {
  if (epochGood_ > 0 || epochSkipped_ == 0)
    return llvm::Error::success();
  std::string first;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stats_.firstSkipped.empty())
      first = stats_.firstSkipped.front();
  }
  return makeError(data_->describe() + ": none of the " + llvm::Twine(epochSkipped_) +
                   " samples of the epoch could be loaded" +
                   (first.empty() ? "" : "; the first: " + first));
}

llvm::Expected<std::optional<Batch>> DataLoader::next() {
  // Only this thread writes started_, so it may read it without the lock.
  if (!started_)
    startEpoch(0);
  if (options_.part)
    return nextPart();
  const int64_t batch = options_.batch;
  Batch out;
  int64_t filled = 0;
  while (filled < batch) {
    if (!current_ || currentSlot_ == current_->count) {
      if (nextChunk_ == chunksPerEpoch_)
        break;
      current_ = takeChunk(nextChunk_++);
      int64_t good = std::count(current_->good.begin(), current_->good.end(), 1);
      epochGood_ += good;
      countSkipped(current_->count - good, std::move(current_->errors));
      currentSlot_ = std::exchange(resumeSlot_, 0);
      // The common case: a whole chunk of good samples is the batch as it is.
      if (filled == 0 && currentSlot_ == 0 && good == current_->count &&
          (current_->count == batch || !options_.dropLast)) {
        out.inputs = std::move(current_->inputs);
        out.labels = std::move(current_->labels);
        filled = current_->count;
        current_.reset();
        break;
      }
      if (currentSlot_ == current_->count) // resumed past the chunk's last sample
        continue;
    }
    if (current_->good[currentSlot_]) {
      if (out.inputs.empty())
        std::tie(out.inputs, out.labels) = batchTensors(batch);
      SampleRef from = rowOf(current_->inputs, current_->labels, currentSlot_);
      SampleRef to = rowOf(out.inputs, out.labels, filled);
      std::memcpy(to.input, from.input, inputBytes_);
      std::memcpy(to.label, from.label, labelBytes_);
      ++filled;
    }
    ++currentSlot_;
  }

  if (filled == 0)
    if (auto e = checkEpochHadSamples())
      return e;
  if (filled == 0 || (filled < batch && options_.dropLast))
    return std::nullopt;
  return handOut(std::move(out), filled);
}

std::optional<Batch> DataLoader::handOut(Batch out, int64_t samples) {
  out.samples = samples;
  out.index = batchIndex_++;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.batches;
  stats_.samples += samples;
  return std::optional<Batch>(std::move(out));
}

llvm::Expected<std::optional<Batch>> DataLoader::nextPart() {
  const LoaderPart &part = *options_.part;
  const int64_t batch = options_.batch, window = anchor_ + nextChunk_ * batch;
  // Fewer positions left than a batch: the short last batch is dropped.
  if (window + batch > data_->size()) {
    if (auto e = checkEpochHadSamples())
      return e;
    return std::nullopt;
  }
  Chunk chunk = takeChunk(nextChunk_++);
  // Which positions of the window failed, on any worker.
  std::vector<uint8_t> failed(batch, 0);
  for (int64_t slot = 0; slot < chunk.count; ++slot)
    failed[part.offset + slot] = !chunk.good[slot];
  if (auto e = part.orAcrossWorkers(failed))
    return e;
  if (llvm::is_contained(failed, 1))
    return partAfterSkips(window, std::move(chunk), std::move(failed));
  // The common case: every sample of the window loaded, the chunk is the part.
  epochGood_ += batch;
  Batch out;
  out.inputs = std::move(chunk.inputs);
  out.labels = std::move(chunk.labels);
  return handOut(std::move(out), rows_);
}

llvm::Error DataLoader::loadPosition(int64_t position, SampleRef dst) {
  if (std::optional<Kept> k = takeKept(position)) {
    if (!k->error.empty())
      return makeError(k->error);
    llvm::copy(k->input, dst.input);
    llvm::copy(k->label, dst.label);
    return llvm::Error::success();
  }
  // Only this thread replaces order_.
  return loadSample((*order_)[position], dst, consumerScratch_);
}

llvm::Expected<std::optional<Batch>> DataLoader::partAfterSkips(int64_t window, Chunk chunk,
                                                                std::vector<uint8_t> failed) {
  const LoaderPart &part = *options_.part;
  const int64_t batch = options_.batch, n = data_->size();
  // The chunks prefetched for the windows after this one hold the wrong
  // positions now; what they loaded is kept for the chunks that follow.
  retireChunks();
  std::vector<std::string> errors = std::move(chunk.errors);
  // The window's good positions, known alike on every worker. It grows by
  // the missing count until it holds a batch (or the epoch cannot fill one);
  // this worker loads the growth's positions that fall in its rows.
  std::vector<int64_t> good;
  int64_t skipped = 0, end = window;
  std::map<int64_t, Kept> grown; // the growth's samples this worker loaded
  while (true) {
    for (int64_t i = 0; i < (int64_t)failed.size(); ++i) {
      if (failed[i])
        ++skipped;
      else
        good.push_back(end + i);
    }
    end += (int64_t)failed.size();
    const int64_t missing = batch - (int64_t)good.size();
    if (missing == 0 || n - end < missing)
      break;
    failed.assign(missing, 0);
    for (int64_t i = part.offset; i < std::min(part.offset + part.count, missing); ++i) {
      Kept k;
      k.input.resize(inputBytes_);
      k.label.resize(labelBytes_);
      if (llvm::Error err = loadPosition(end + i, {k.input.data(), k.label.data()})) {
        errors.push_back(llvm::toString(std::move(err)));
        failed[i] = 1;
      } else {
        grown.emplace(end + i, std::move(k));
      }
    }
    if (auto e = part.orAcrossWorkers(failed))
      return e;
  }
  countSkipped(skipped, std::move(errors));
  if ((int64_t)good.size() < batch) {
    nextChunk_ = 0;
    restartChunks(n, 0, /*newEpoch=*/false);
    if (auto e = checkEpochHadSamples())
      return e;
    return std::nullopt;
  }
  epochGood_ += batch;

  // This worker's rows: from its chunk, from the growth it loaded, or loaded
  // now (samples another worker loaded for the window).
  Batch out;
  std::tie(out.inputs, out.labels) = batchTensors(rows_);
  for (int64_t r = 0; r < rows_; ++r) {
    const int64_t position = good[part.offset + r];
    SampleRef dst = rowOf(out.inputs, out.labels, r);
    auto g = grown.find(position);
    if (position >= chunk.first && position < chunk.first + chunk.count) {
      SampleRef from = rowOf(chunk.inputs, chunk.labels, position - chunk.first);
      std::memcpy(dst.input, from.input, inputBytes_);
      std::memcpy(dst.label, from.label, labelBytes_);
    } else if (g != grown.end()) {
      llvm::copy(g->second.input, dst.input);
      llvm::copy(g->second.label, dst.label);
    } else if (llvm::Error err = loadPosition(position, dst)) {
      return makeError(
          data_->describe() + ": sample " + llvm::Twine((*order_)[position]) +
          " loaded on another worker but not on this one: " + llvm::toString(std::move(err)));
    }
  }
  // Prefetching goes on after the window.
  nextChunk_ = 0;
  restartChunks(end, 0, /*newEpoch=*/false);
  return handOut(std::move(out), rows_);
}

} // namespace graphc
