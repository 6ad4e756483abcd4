#include "tools/driver/TensorBoard.h"

#include "ir/Diagnostics.h"
#include "ir/OutputFile.h"
#include "tools/driver/Progress.h"

#include "TensorBoardEvent.pb.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <array>
#include <chrono>
#include <unistd.h>

namespace graphc {

namespace {

/// One byte at a time: the events of a step are a few hundred bytes, so a
/// table is fast enough and needs no CPU feature check.
constexpr std::array<uint32_t, 256> crc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit)
      c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = crc32cTable();

double wallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || !name[0])
    return "localhost";
  return name;
}

} // namespace

uint32_t crc32c(llvm::StringRef bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes)
    c = kCrc32cTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t maskedCrc32c(llvm::StringRef bytes) {
  uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string tfRecord(llvm::StringRef data) {
  auto littleEndian = [](uint64_t v, int bytes) {
    std::string s;
    for (int i = 0; i < bytes; ++i)
      s.push_back((char)((v >> (8 * i)) & 0xFF));
    return s;
  };
  std::string length = littleEndian(data.size(), 8);
  std::string record = length;
  record += littleEndian(maskedCrc32c(length), 4);
  record += data;
  record += littleEndian(maskedCrc32c(data), 4);
  return record;
}

llvm::Expected<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::open(llvm::StringRef dir,
                                                                           int64_t firstStep) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return makeError("--tensorboard " + dir + ": cannot create the directory: " + ec.message());
  // Seconds, host and process, so that a resumed run's file sorts after the
  // first run's; a counter after them when that name is taken (two runs of
  // one process in one second), which sorts after it too.
  const std::string name = "events.out.tfevents." + std::to_string((long long)wallTime()) + "." +
                           hostName() + "." + std::to_string((long long)getpid());
  llvm::SmallString<128> path;
  for (int n = 0; path.empty() || llvm::sys::fs::exists(path); ++n) {
    path = dir;
    llvm::sys::path::append(path, n ? name + "." + std::to_string(n) : name);
  }
  auto out = OutputStream::open(path, /*append=*/false);
  if (!out)
    return withContext(out.takeError(), "--tensorboard");
  std::unique_ptr<TensorBoardWriter> w(new TensorBoardWriter(path.str().str(), std::move(*out)));
  tensorboard::Event version;
  version.set_wall_time(wallTime());
  version.set_file_version("brain.Event:2");
  tensorboard::Event start;
  start.set_wall_time(wallTime());
  start.set_step(firstStep);
  start.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  for (const tensorboard::Event *e : {&version, &start})
    if (auto err = w->out_->write(tfRecord(e->SerializeAsString())))
      return withContext(std::move(err), "--tensorboard");
  return w;
}

TensorBoardWriter::TensorBoardWriter(std::string path, std::unique_ptr<OutputStream> out)
    : path_(std::move(path)), out_(std::move(out)) {}

TensorBoardWriter::~TensorBoardWriter() = default;

llvm::Error TensorBoardWriter::step(const StepRecord &r) {
  llvm::SmallVector<TensorBoardScalar, 4> s = {{"train/loss", r.loss},
                                               {"train/learning_rate", r.lr},
                                               {"train/images_per_second", r.imagesPerSecond}};
  if (r.lossScale)
    s.push_back({"train/loss_scale", *r.lossScale});
  return scalars(r.step, s);
}

llvm::Error TensorBoardWriter::eval(int64_t step, std::optional<double> accuracy, double loss) {
  if (!accuracy)
    return scalars(step, {{"eval/loss", loss}});
  return scalars(step, {{"eval/accuracy", *accuracy}, {"eval/loss", loss}});
}

llvm::Error TensorBoardWriter::scalars(int64_t step, llvm::ArrayRef<TensorBoardScalar> scalars) {
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_step(step);
  tensorboard::Summary *summary = event.mutable_summary();
  for (const TensorBoardScalar &s : scalars) {
    tensorboard::SummaryValue *v = summary->add_value();
    v->set_tag(s.tag.str());
    v->set_simple_value((float)s.value);
  }
  return withContext(out_->write(tfRecord(event.SerializeAsString())), "--tensorboard");
}

llvm::Error TensorBoardWriter::close() {
  return withContext(out_->close(), "--tensorboard");
}

} // namespace graphc
