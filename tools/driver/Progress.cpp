#include "tools/driver/Progress.h"

#include "ir/Diagnostics.h"

#include "llvm/Support/Format.h"

#include <cstdio>

namespace graphc {

ProgressLine::ProgressLine(llvm::raw_ostream &os, int64_t total, bool enabled, int64_t from)
    : os_(os), total_(total), from_(from), enabled_(enabled), tty_(os.is_displayed()),
      start_(std::chrono::steady_clock::now()) {}

void ProgressLine::update(int64_t done, int64_t epoch, double loss, double imagesPerSecond,
                          std::optional<uint64_t> staleness) {
  if (!enabled_)
    return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = done > from_ ? elapsed / (done - from_) * (total_ - done) : 0;
  if (!tty_) {
    // A line every 5% (and the first and last step).
    int64_t bucket = total_ ? done * 20 / total_ : done;
    if (bucket == lastPrinted_ && done != total_ && done != from_ + 1)
      return;
    lastPrinted_ = bucket;
  }
  const int width = 24;
  int filled = total_ ? (int)(width * done / total_) : 0;
  std::string bar(filled, '#');
  bar.resize(width, '.');
  if (tty_)
    os_ << "\r";
  os_ << llvm::format("[%s] %lld/%lld  epoch %lld  loss %.4f  %.1f img/s  eta %.0fs", bar.c_str(),
                      (long long)done, (long long)total_, (long long)epoch, loss, imagesPerSecond,
                      eta);
  if (staleness)
    os_ << "  staleness " << *staleness;
  if (tty_) {
    os_ << "   ";
    open_ = true;
  } else {
    os_ << "\n";
  }
  os_.flush();
}

void ProgressLine::finish() {
  if (open_)
    os_ << "\n";
  open_ = false;
}

llvm::Expected<std::unique_ptr<MetricsWriter>> MetricsWriter::open(llvm::StringRef path,
                                                                   bool append) {
  auto out = OutputStream::open(path, append);
  if (!out)
    return withContext(out.takeError(), "metrics");
  bool csv = path.endswith(".csv");
  if (csv && (*out)->startedEmpty())
    if (auto e = (*out)->write(
            "kind,step,epoch,loss,lr,seconds,images_per_sec,input_wait,accuracy,samples,"
            "staleness,compute,intra_worker,inter_worker,input_staging,loss_scale,"
            "skipped_steps\n"))
      return withContext(std::move(e), "metrics");
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(std::move(*out), csv));
}

llvm::Error MetricsWriter::step(const StepRecord &r) {
  std::string record;
  llvm::raw_string_ostream os(record);
  std::string staleness = r.staleness ? std::to_string(*r.staleness) : "";
  const StepTimes &p = r.parts;
  if (csv_) {
    os << llvm::format("step,%lld,%lld,%.6g,%.6g,%.6g,%.6g,%.6g,,,", (long long)r.step,
                       (long long)r.epoch, r.loss, r.lr, r.seconds, r.imagesPerSecond, r.inputWait)
       << staleness
       << llvm::format(",%.6g,%.6g,%.6g,%.6g,", p.compute, p.intraWorker, p.interWorker, p.input);
    if (r.lossScale)
      os << llvm::format("%.9g", *r.lossScale);
    os << ",";
    if (r.skippedSteps)
      os << *r.skippedSteps;
    os << "\n";
  } else {
    os << llvm::format("{\"kind\":\"step\",\"step\":%lld,\"epoch\":%lld,\"loss\":%.6g,"
                       "\"lr\":%.6g,\"seconds\":%.6g,\"images_per_sec\":%.6g,"
                       "\"input_wait\":%.6g,\"compute\":%.6g,\"intra_worker\":%.6g,"
                       "\"inter_worker\":%.6g,\"input_staging\":%.6g",
                       (long long)r.step, (long long)r.epoch, r.loss, r.lr, r.seconds,
                       r.imagesPerSecond, r.inputWait, p.compute, p.intraWorker, p.interWorker,
                       p.input);
    if (r.staleness)
      os << ",\"staleness\":" << staleness;
    if (r.lossScale)
      os << llvm::format(",\"loss_scale\":%.9g", *r.lossScale);
    if (r.skippedSteps)
      os << ",\"skipped_steps\":" << *r.skippedSteps;
    if (run_)
      os << ",\"run\":" << runJson(*run_);
    os << "}\n";
  }
  run_.reset();
  return withContext(out_->write(os.str()), "metrics");
}

llvm::Error MetricsWriter::eval(int64_t step, int64_t epoch, std::optional<double> accuracy,
                                double loss, int64_t samples, double seconds) {
  std::string record;
  llvm::raw_string_ostream os(record);
  char acc[32] = "";
  if (accuracy)
    std::snprintf(acc, sizeof acc, "%.6g", *accuracy);
  if (csv_)
    os << llvm::format("eval,%lld,%lld,%.6g,,%.6g,,,%s,%lld,,,,,,,\n", (long long)step,
                       (long long)epoch, loss, seconds, static_cast<const char *>(acc),
                       (long long)samples);
  else
    os << llvm::format("{\"kind\":\"eval\",\"step\":%lld,\"epoch\":%lld,\"loss\":%.6g,",
                       (long long)step, (long long)epoch, loss)
       << (accuracy ? "\"accuracy\":" + std::string(acc) + "," : "")
       << llvm::format("\"samples\":%lld,\"seconds\":%.6g}\n", (long long)samples, seconds);
  return withContext(out_->write(os.str()), "metrics");
}

llvm::Error MetricsWriter::close() {
  return withContext(out_->close(), "metrics");
}

} // namespace graphc
