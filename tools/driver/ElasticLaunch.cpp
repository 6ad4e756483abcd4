//===- ElasticLaunch.cpp - A job that restarts on the workers still alive -===//

#include "tools/driver/ElasticLaunch.h"

#include "ir/Diagnostics.h"
#include "ir/OutputFile.h"
#include "tools/driver/Interrupt.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

extern char **environ;

namespace graphc {

using Clock = std::chrono::steady_clock;

llvm::Error parseElasticRange(llvm::StringRef text, unsigned &min, unsigned &max) {
  auto [lo, hi] = text.split(':');
  if (hi.empty() && !text.contains(':'))
    hi = lo;
  if (lo.getAsInteger(10, min) || hi.getAsInteger(10, max) || min < 1 || max < min)
    return makeError("--elastic '" + text +
                     "': expected MIN:MAX, the fewest and the most workers, 1 <= MIN <= MAX");
  return llvm::Error::success();
}

llvm::Expected<std::vector<HostSlots>> parseHostfile(llvm::StringRef text, llvm::StringRef path) {
  std::vector<HostSlots> hosts;
  llvm::SmallVector<llvm::StringRef, 16> lines;
  text.split(lines, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    llvm::StringRef line = lines[i].split('#').first.trim();
    if (line.empty())
      continue;
    llvm::SmallVector<llvm::StringRef, 4> words;
    llvm::SplitString(line, words); // at spaces and tabs
    HostSlots h{words[0].str(), 1};
    for (llvm::StringRef w : llvm::ArrayRef<llvm::StringRef>(words).drop_front()) {
      auto [key, value] = w.split('=');
      unsigned n = 0;
      const bool number = !value.getAsInteger(10, n) && n > 0;
      if (key == "slots" && number)
        h.slots = n;
      else if (!((key == "max_slots" || key == "max-slots") && number))
        return makeError(path + ":" + llvm::Twine(i + 1) + ": '" + w +
                         "': expected slots=N (N >= 1) after the host name");
    }
    hosts.push_back(std::move(h));
  }
  if (hosts.empty())
    return makeError(path + ": no hosts");
  return hosts;
}

std::vector<HostSlots> segmentHosts(llvm::ArrayRef<HostSlots> answering, unsigned max) {
  std::vector<HostSlots> taken;
  unsigned left = max;
  for (const HostSlots &h : answering) {
    if (left == 0)
      break;
    taken.push_back({h.name, std::min(h.slots, left)});
    left -= taken.back().slots;
  }
  return taken;
}

llvm::Error readTrainFlags(llvm::ArrayRef<std::string> train, std::string &checkpointDir,
                           std::string &metrics) {
  for (size_t i = 0; i < train.size(); ++i) {
    llvm::StringRef a = train[i];
    auto value = [&](llvm::StringRef flag, std::string &into) -> bool {
      if (a == flag && i + 1 < train.size()) {
        into = train[++i];
        return true;
      }
      if (a.consume_front((flag + "=").str())) {
        into = a.str();
        return true;
      }
      return false;
    };
    if (value("--checkpoint", checkpointDir) || value("--metrics", metrics))
      continue;
    if (a == "--workers" || a.startswith("--workers=") || a == "--tasks" ||
        a.startswith("--tasks="))
      return makeError(a.split('=').first +
                       ": an elastic run's workers are each segment's processes (mpirun's); "
                       "leave it out");
  }
  if (checkpointDir.empty())
    return makeError("an elastic run restarts from its checkpoints: give the training flags "
                     "--checkpoint DIR (and --checkpoint-every N)");
  if (!metrics.empty() && !llvm::StringRef(metrics).endswith(".jsonl"))
    return makeError("--metrics " + metrics +
                     ": an elastic run records its segments among the steps in JSON lines; "
                     "name a .jsonl file");
  return llvm::Error::success();
}

namespace {

/// The step of the checkpoint `latest` names (0 when there is none yet).
uint64_t latestStep(llvm::StringRef dir) {
  auto buf = llvm::MemoryBuffer::getFile(dir + "/latest");
  if (!buf)
    return 0;
  llvm::StringRef name = (*buf)->getBuffer().trim();
  uint64_t step = 0;
  if (!name.consume_front("step-") || !name.consume_back(".gck") || name.getAsInteger(10, step))
    return 0;
  return step;
}

/// A step's record in the metrics: its number and seconds.
struct StepTime {
  uint64_t step = 0;
  double seconds = 0;
};

/// The steps the metrics recorded after byte `offset` (a segment's).
std::vector<StepTime> recordedSteps(llvm::StringRef metrics, uint64_t offset) {
  std::vector<StepTime> steps;
  auto buf = metrics.empty() ? nullptr : llvm::MemoryBuffer::getFile(metrics);
  if (!buf || offset > (*buf)->getBufferSize())
    return steps;
  llvm::SmallVector<llvm::StringRef, 0> lines;
  (*buf)->getBuffer().drop_front(offset).split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    auto value = llvm::json::parse(line);
    if (!value) { // a line cut short by a rank killed while writing
      llvm::consumeError(value.takeError());
      continue;
    }
    const llvm::json::Object *record = value->getAsObject();
    if (!record || record->getString("kind") != llvm::StringRef("step"))
      continue;
    auto step = record->getInteger("step");
    auto seconds = record->getNumber("seconds");
    if (step && *step >= 0 && seconds)
      steps.push_back({(uint64_t)*step, *seconds});
  }
  return steps;
}

uint64_t fileSize(llvm::StringRef path) {
  uint64_t size = 0;
  return path.empty() || llvm::sys::fs::file_size(path, size) ? 0 : size;
}

std::string describeHosts(llvm::ArrayRef<HostSlots> hosts) {
  std::vector<std::string> parts;
  for (const HostSlots &h : hosts)
    parts.push_back(h.name + " (" + std::to_string(h.slots) + ")");
  return llvm::join(parts, ", ");
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

class Supervisor {
public:
  Supervisor(const ElasticOptions &o, llvm::raw_ostream &out) : o_(o), out_(out) {}

  llvm::Expected<int> run() {
    auto buf = llvm::MemoryBuffer::getFile(o_.hostfile);
    if (!buf)
      return makeError("cannot read hostfile '" + o_.hostfile + "': " + buf.getError().message());
    auto hosts = parseHostfile((*buf)->getBuffer(), o_.hostfile);
    if (!hosts)
      return hosts.takeError();
    if (auto e = readTrainFlags(o_.trainArgs, checkpointDir_, metrics_))
      return e;
    const StopFlags &stop = installStopHandlers();
    // The segment before this one: when it ended, the step it reached, its steps' times.
    Clock::time_point failedAt;
    uint64_t failedReached = 0;
    std::vector<StepTime> failedSteps;
    for (unsigned segment = 1;; ++segment) {
      auto chosen = chooseHosts(*hosts, segment);
      if (!chosen)
        return chosen.takeError();
      const std::vector<HostSlots> &taken = chosen->hosts;
      const unsigned workers = chosen->workers;
      const uint64_t from = latestStep(checkpointDir_);
      out_ << "graphrun launch: segment " << segment << ": " << workers << " workers on "
           << describeHosts(taken) << " from step " << from << chosen->notes << "\n";
      if (segment > 1) {
        const uint64_t redo = failedReached - std::min(failedReached, from);
        out_ << llvm::format("graphrun launch: restart %u: %llu step%s to redo (the failed "
                             "segment reached step %llu), %.1f s from the failure to the restart\n",
                             segment - 1, (unsigned long long)redo, redo == 1 ? "" : "s",
                             (unsigned long long)failedReached, seconds(Clock::now() - failedAt));
      }
      out_.flush();
      const Clock::time_point start = Clock::now();
      const uint64_t offset = fileSize(metrics_);
      auto rc = runSegment(taken, workers);
      if (!rc)
        return rc.takeError();
      const Clock::time_point end = Clock::now();
      std::vector<StepTime> steps = recordedSteps(metrics_, offset);
      double stepSeconds = 0;
      for (const StepTime &t : steps)
        stepSeconds += t.seconds;
      std::optional<double> restartCost;
      if (segment > 1 && !metrics_.empty()) {
        double redone = 0;
        for (const StepTime &t : failedSteps)
          redone += t.step > from ? t.seconds : 0;
        restartCost = reportRestartCost(segment, redone, seconds(start - failedAt),
                                        std::max(0.0, seconds(end - start) - stepSeconds));
      }
      failedAt = end;
      failedReached = steps.empty() ? latestStep(checkpointDir_) : steps.back().step;
      failedSteps = std::move(steps);
      workersPerSegment_.push_back(workers);
      if (auto e = record(segment, workers, taken, from, failedReached, *rc, end - start,
                          stepSeconds, restartCost))
        return e;
      if (*rc == 0) {
        out_ << "graphrun launch: done after " << segment << " segment" << (segment > 1 ? "s" : "")
             << " (workers " << llvm::join(map(workersPerSegment_), ", ") << "), " << segment - 1
             << " restart" << (segment == 2 ? "" : "s") << "\n";
        return 0;
      }
      if (int sig = stop.signal.load())
        return 128 + sig; // the launch itself was stopped: no restart
      out_ << llvm::format(
          "graphrun launch: segment %u failed (exit %d) after %.1f s, at step %llu\n", segment, *rc,
          seconds(end - start), (unsigned long long)failedReached);
      if (segment > o_.maxRestarts)
        return makeError("segment " + llvm::Twine(segment) + " failed (exit " + llvm::Twine(*rc) +
                         ") after " + llvm::Twine(o_.maxRestarts) +
                         " restarts (--max-restarts): giving up");
    }
  }

private:
  /// A segment's hosts: those that answer, in the hostfile's order, up to --elastic's MAX
  /// workers; the notes name the hosts that did not answer.
  struct Chosen {
    std::vector<HostSlots> hosts;
    unsigned workers = 0;
    std::string notes;
  };

  llvm::Expected<Chosen> chooseHosts(llvm::ArrayRef<HostSlots> hosts, unsigned segment) {
    std::vector<HostSlots> answering;
    std::vector<std::string> silent;
    for (const HostSlots &h : hosts) {
      if (answers(h.name))
        answering.push_back(h);
      else
        silent.push_back(h.name);
    }
    Chosen c;
    c.hosts = segmentHosts(answering, o_.maxWorkers);
    for (const HostSlots &h : c.hosts)
      c.workers += h.slots;
    if (!silent.empty())
      c.notes = "; " + llvm::join(silent, ", ") + " did not answer";
    if (c.workers < o_.minWorkers)
      return makeError("segment " + llvm::Twine(segment) + ": " + llvm::Twine(c.workers) +
                       " workers answer, fewer than --elastic's minimum " +
                       llvm::Twine(o_.minWorkers) + c.notes);
    return c;
  }

  /// Prints what the restart before `segment` cost, and returns it: the steps redone, the
  /// time between the segments, and the segment's time outside its steps (start-up,
  /// checkpoints, the end; an uninterrupted run pays the last two once, so this is an upper
  /// bound).
  double reportRestartCost(unsigned segment, double redone, double between, double outside) {
    const double cost = redone + between + outside;
    out_ << llvm::format("graphrun launch: restart %u cost %.1f s: %.1f s of steps redone, "
                         "%.1f s between the segments, %.1f s of segment %u outside its "
                         "steps (start-up, checkpoints, its end or failure)\n",
                         segment - 1, cost, redone, between, outside, segment);
    return cost;
  }

  static std::vector<std::string> map(llvm::ArrayRef<unsigned> v) {
    std::vector<std::string> s;
    for (unsigned x : v)
      s.push_back(std::to_string(x));
    return s;
  }

  /// mpirun's command line followed by `extra`, as references into args_ (valid until the
  /// next call).
  std::vector<llvm::StringRef> mpirunWith(llvm::ArrayRef<std::string> extra) {
    args_.assign(o_.mpirun.begin(), o_.mpirun.end());
    args_.insert(args_.end(), extra.begin(), extra.end());
    return std::vector<llvm::StringRef>(args_.begin(), args_.end());
  }

  /// Whether mpirun can start a process on `host` within the probe timeout.
  bool answers(const std::string &host) {
    auto args = mpirunWith({"--host", host + ":1", "-np", "1", "true"});
    auto program = llvm::sys::findProgramByName(args[0]);
    if (!program)
      return false;
    llvm::Optional<llvm::StringRef> quiet[] = {llvm::StringRef(""), llvm::StringRef(""),
                                               llvm::StringRef("")};
    return llvm::sys::ExecuteAndWait(*program, args, llvm::None, quiet,
                                     (unsigned)std::ceil(o_.probeTimeout)) == 0;
  }

  llvm::Expected<int> runSegment(llvm::ArrayRef<HostSlots> hosts, unsigned workers) {
    llvm::SmallString<128> hostfile;
    if (auto ec = llvm::sys::fs::createTemporaryFile("graphrun-segment", "hosts", hostfile))
      return makeError("cannot write the segment's hostfile: " + ec.message());
    std::string text;
    for (const HostSlots &h : hosts)
      text += h.name + " slots=" + std::to_string(h.slots) + "\n";
    if (auto e = writeOutputFile(hostfile, text))
      return e;
    std::vector<std::string> extra = {
        "--hostfile", hostfile.str().str(), "-np", std::to_string(workers), o_.graphrun, "train"};
    extra.insert(extra.end(), o_.trainArgs.begin(), o_.trainArgs.end());
    if (llvm::find(o_.trainArgs, "--resume") == o_.trainArgs.end())
      extra.push_back("--resume");
    auto args = mpirunWith(extra);
    auto program = llvm::sys::findProgramByName(args[0]);
    if (!program)
      return makeError("cannot find '" + args[0] + "' (--mpirun)");
    std::string message;
    std::vector<llvm::StringRef> env(environment_.begin(), environment_.end());
    int rc = llvm::sys::ExecuteAndWait(*program, args, llvm::ArrayRef<llvm::StringRef>(env), {}, 0,
                                       0, &message);
    llvm::sys::fs::remove(hostfile);
    if (rc == -1)
      return makeError("cannot run '" + *program + "': " + message);
    return rc;
  }

  llvm::Error record(unsigned segment, unsigned workers, llvm::ArrayRef<HostSlots> hosts,
                     uint64_t from, uint64_t reached, int rc, Clock::duration took,
                     double stepSeconds, std::optional<double> restartCost) {
    if (metrics_.empty())
      return llvm::Error::success();
    std::vector<std::string> names;
    for (const HostSlots &h : hosts)
      names.push_back("\"" + h.name + "\"");
    std::error_code ec;
    llvm::raw_fd_ostream os(metrics_, ec, llvm::sys::fs::OF_Append);
    if (!ec) {
      os << llvm::format("{\"kind\":\"segment\",\"segment\":%u,\"workers\":%u,\"hosts\":[%s],"
                         "\"from_step\":%llu,\"to_step\":%llu,\"exit\":%d,\"seconds\":%.3f,"
                         "\"step_seconds\":%.3f",
                         segment, workers, llvm::join(names, ",").c_str(), (unsigned long long)from,
                         (unsigned long long)reached, rc, seconds(took), stepSeconds);
      if (restartCost)
        os << llvm::format(",\"restart_seconds\":%.3f", *restartCost);
      os << "}\n";
      os.close();
      ec = os.error();
    }
    if (ec)
      return makeError("--metrics " + metrics_ + ": cannot record segment " + llvm::Twine(segment) +
                       ": " + ec.message());
    return llvm::Error::success();
  }

  /// This process's environment, and Open MPI's settings that let mpirun notice a lost host
  /// within seconds ("Host failures" in docs/multi-worker.md) unless it says otherwise (a
  /// setting on mpirun's command line also wins over these).
  static std::vector<std::string> launcherEnvironment() {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e)
      env.push_back(*e);
    for (const char *setting :
         {"OMPI_MCA_oob_tcp_keepalive_time=1", "OMPI_MCA_oob_tcp_keepalive_intvl=1",
          "OMPI_MCA_oob_tcp_keepalive_probes=3", "OMPI_MCA_odls_base_sigkill_timeout=3"}) {
      llvm::StringRef name = llvm::StringRef(setting).split('=').first;
      if (!std::getenv(name.str().c_str()))
        env.push_back(setting);
    }
    return env;
  }

  const ElasticOptions &o_;
  llvm::raw_ostream &out_;
  std::vector<std::string> environment_ = launcherEnvironment();
  std::string checkpointDir_, metrics_;
  std::vector<std::string> args_;
  std::vector<unsigned> workersPerSegment_;
};

} // namespace

llvm::Expected<int> runElastic(const ElasticOptions &o, llvm::raw_ostream &out) {
  return Supervisor(o, out).run();
}

} // namespace graphc
