//===- RunView.cpp - Reading a run's metrics and trace for the view ---------===//
//
// Both readers keep only what the page draws: a few numbers per step and per
// device, so a long run adds tens of kilobytes to the page, not its trace.
//
//===----------------------------------------------------------------------===//

#include "placement/RunView.h"

#include "placement/ViewTree.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <map>
#include <set>

namespace graphc {
namespace {

/// executor/StepBreakdown.h's parts (breakdownPartName), by precedence.
constexpr llvm::StringLiteral kParts[] = {"kernels",    "collectives", "copies h2d",
                                          "copies d2d", "copies d2h",  "waits",
                                          "host",       "launch gaps", "other"};

std::string joined(llvm::ArrayRef<std::string> names) {
  return names.empty() ? "(none)" : llvm::join(names, ", ");
}

std::string describe(const RunIdentity &id) {
  return "model '" + id.model + "' on " + joined(id.devices) + " at batch " +
         (id.batch ? std::to_string(id.batch) : std::string("(the model's own)"));
}

llvm::Expected<std::string> readWhole(llvm::StringRef path, llvm::StringRef what) {
  auto buffer = readInputFile(path, what);
  if (!buffer)
    return buffer.takeError();
  return (*buffer)->getBuffer().str();
}

/// llvm::json's "[1:11, byte=11]: Unterminated string" as a column and the message.
std::pair<std::string, std::string> jsonErrorAt(llvm::Error e) {
  std::string text = llvm::toString(std::move(e));
  llvm::StringRef at, message = text;
  if (message.consume_front("["))
    std::tie(at, message) = message.split("]: ");
  llvm::StringRef column = at.split(':').second.split(',').first;
  return {column.str(), message.str()};
}

/// The string value of `key` in one event's text, without parsing it: a
/// quoted "key" followed by a colon can only be a key (a quote inside a
/// string is escaped). Enough to pick the few events the view reads out of a
/// trace whose kernels are most of its bytes.
llvm::StringRef stringField(llvm::StringRef event, llvm::StringRef key) {
  const std::string quoted = ("\"" + key + "\"").str();
  for (size_t at = event.find(quoted); at != llvm::StringRef::npos;
       at = event.find(quoted, at + 1)) {
    llvm::StringRef rest = event.drop_front(at + quoted.size()).ltrim();
    if (!rest.consume_front(":"))
      continue;
    rest = rest.ltrim();
    if (!rest.consume_front("\""))
      return "";
    return rest.take_until([](char c) { return c == '"' || c == '\\'; });
  }
  return "";
}

/// Calls `each` with the index and text of every element of the JSON array
/// `text`, finding their ends by brackets and strings alone (the elements
/// are parsed by whoever wants them).
llvm::Error forEachElement(llvm::StringRef text, llvm::StringRef file,
                           llvm::function_ref<llvm::Error(size_t, llvm::StringRef)> each) {
  text = text.trim();
  if (!text.consume_front("["))
    return makeError(file + ": not graphrun's --trace (a JSON array of events)");
  text = text.ltrim();
  if (text.consume_front("]"))
    return llvm::Error::success();
  for (size_t index = 0;; ++index) {
    if (text.empty())
      return makeError(file + ": not a JSON trace: it ends before event " + llvm::Twine(index) +
                       " (cut short?)");
    if (text.front() != '{')
      return makeError(file + ": event " + llvm::Twine(index) + " is not a JSON object");
    int depth = 0;
    bool inString = false;
    size_t end = 0;
    for (; end < text.size(); ++end) {
      char c = text[end];
      if (inString) {
        if (c == '\\')
          ++end;
        else if (c == '"')
          inString = false;
      } else if (c == '"') {
        inString = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        break;
      }
    }
    if (end >= text.size())
      return makeError(file + ": not a JSON trace: it ends inside event " + llvm::Twine(index) +
                       " (cut short?)");
    if (auto e = each(index, text.take_front(end + 1)))
      return e;
    text = text.drop_front(end + 1).ltrim();
    if (text.consume_front(",")) {
      text = text.ltrim();
      continue;
    }
    if (text.consume_front("]") && text.trim().empty())
      return llvm::Error::success();
    if (text.empty())
      return makeError(file + ": not a JSON trace: it ends after event " + llvm::Twine(index) +
                       " (cut short?)");
    return oneLine(makeError(file + ": not a JSON trace: after event " + llvm::Twine(index) + ": " +
                             printable(text, 20)));
  }
}

/// A step record's "run" (runJson); none when it is not one.
std::optional<RunIdentity> readRun(const llvm::json::Value &value) {
  const llvm::json::Object *run = value.getAsObject();
  const llvm::json::Array *devices = run ? run->getArray("devices") : nullptr;
  auto model = run ? run->getString("model") : llvm::None;
  auto batch = run ? run->getInteger("batch") : llvm::None;
  if (!devices || !model || !batch)
    return std::nullopt;
  RunIdentity id{model->str(), {}, *batch};
  for (const llvm::json::Value &d : *devices) {
    auto name = d.getAsString();
    if (!name)
      return std::nullopt;
    id.devices.push_back(name->str());
  }
  return id;
}

/// One step of a trace: its runs' wall time, each device's time per part.
struct StepTotals {
  double wallUs = 0;
  std::map<std::string, std::map<std::string, double>> partUs; ///< device -> part -> us
};

/// The mean step of `steps` (by step number), as summarizeRuns takes it:
/// the first of several carries one-time work and is left out.
RunTrace meanStep(llvm::StringRef file, const std::map<int64_t, StepTotals> &steps,
                  const std::map<int64_t, std::string> &deviceOfPid,
                  const std::set<std::string> &partNames) {
  RunTrace out;
  out.file = file.str();
  for (llvm::StringRef p : kParts)
    out.parts.push_back(p.str());
  for (const std::string &p : partNames)
    if (!llvm::is_contained(out.parts, p))
      out.parts.push_back(p);
  out.profiledSteps = steps.size();
  auto first = steps.begin();
  if (steps.size() > 1) {
    out.firstStepMs = first->second.wallUs / 1e3;
    ++first;
  }
  out.averagedSteps = std::distance(first, steps.end());
  out.firstAveraged = first->first + 1;
  out.lastAveraged = steps.rbegin()->first + 1;
  std::map<std::string, std::vector<double>> devices;
  for (const std::string &d : llvm::make_second_range(deviceOfPid))
    devices[d].assign(out.parts.size(), 0.0);
  const double mean = 1.0 / out.averagedSteps / 1e3;
  for (auto it = first; it != steps.end(); ++it) {
    out.wallMs += it->second.wallUs * mean;
    for (auto &[device, parts] : it->second.partUs)
      for (auto &[part, us] : parts)
        devices[device][llvm::find(out.parts, part) - out.parts.begin()] += us * mean;
  }
  for (auto &[name, partMs] : devices)
    out.devices.push_back({name, std::move(partMs)});
  return out;
}

} // namespace

RunIdentity runIdentityOf(const Module &plan) {
  RunIdentity id{plan.name(), {}, plan.batch().value_or(0)};
  for (DeviceId d : devicesOf(plan))
    id.devices.push_back(d.str());
  return id;
}

std::string runJson(const RunIdentity &id) {
  llvm::json::Array devices;
  for (const std::string &d : id.devices)
    devices.push_back(d);
  llvm::json::Object run{{"model", id.model}, {"devices", std::move(devices)}, {"batch", id.batch}};
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(std::move(run));
  return os.str();
}

llvm::Expected<RunMetrics> parseMetrics(llvm::StringRef text, llvm::StringRef file) {
  RunMetrics out;
  out.file = file.str();
  std::map<int64_t, RunMetrics::Step> steps;
  std::map<int64_t, RunMetrics::Eval> evals;
  unsigned lineNo = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    ++lineNo;
    if (line.trim().empty())
      continue;
    auto at = [&](const llvm::Twine &msg) {
      return oneLine(makeError(file + ":" + llvm::Twine(lineNo) + ": " + msg));
    };
    auto value = llvm::json::parse(line);
    if (!value) {
      auto [column, message] = jsonErrorAt(value.takeError());
      return at("column " + column + ": not a JSON record: " + message);
    }
    const llvm::json::Object *record = value->getAsObject();
    if (!record)
      return at("not a JSON object (graphrun's --metrics writes one object per line)");
    auto kind = record->getString("kind");
    if (!kind)
      return at("a record without a \"kind\"");
    auto number = [&](llvm::StringRef key) -> llvm::Expected<double> {
      if (auto v = record->getNumber(key))
        return *v;
      return at("a \"" + *kind + "\" record without a number \"" + key + "\"");
    };
    if (*kind == "step" || *kind == "eval") {
      auto step = number("step");
      if (!step)
        return step.takeError();
      auto loss = number("loss");
      if (!loss)
        return loss.takeError();
      // A regression's evaluation has no accuracy.
      const bool hasOther = *kind == "step" || record->get("accuracy");
      auto other = hasOther ? number(*kind == "step" ? "lr" : "accuracy")
                            : llvm::Expected<double>(0.0);
      if (!other)
        return other.takeError();
      if (const llvm::json::Value *run = record->get("run")) {
        std::optional<RunIdentity> id = readRun(*run);
        if (!id)
          return at("a \"run\" needs \"model\", \"devices\" (names) and \"batch\"");
        out.runs.push_back(std::move(*id));
      }
      int64_t s = (int64_t)*step;
      // A resumed run redoes the steps after its checkpoint: the last record wins.
      if (*kind == "step")
        steps[s] = {s, *loss, *other};
      else
        evals[s] = {s, *loss, hasOther ? std::optional<double>(*other) : std::nullopt};
    }
  }
  if (steps.empty())
    return oneLine(makeError(file + ": no \"step\" records (is it graphrun's --metrics file?)"));
  for (auto &[s, r] : steps)
    out.steps.push_back(r);
  for (auto &[s, r] : evals)
    out.evals.push_back(r);
  return out;
}

llvm::Expected<RunMetrics> readMetrics(llvm::StringRef path) {
  if (path.endswith(".csv"))
    return makeError("metrics '" + path +
                     "': graphc view reads the JSON lines form (graphrun --metrics FILE.jsonl)");
  auto text = readWhole(path, "metrics");
  if (!text)
    return text.takeError();
  return parseMetrics(*text, path);
}

llvm::Expected<RunTrace> parseTrace(llvm::StringRef text, llvm::StringRef file) {
  // The process names, the step slices and the breakdown's: a trace's bytes
  // are mostly kernels, which are never built.
  std::vector<std::pair<size_t, llvm::json::Object>> events;
  auto keep = [&](size_t index, llvm::StringRef event) -> llvm::Error {
    llvm::StringRef cat = stringField(event, "cat");
    if (cat != "step" && cat != "breakdown" && stringField(event, "ph") != "M")
      return llvm::Error::success();
    auto value = llvm::json::parse(event);
    if (!value)
      return oneLine(makeError(file + ": event " + llvm::Twine(index) +
                               ": not JSON: " + llvm::toString(value.takeError())));
    if (llvm::json::Object *o = value->getAsObject())
      events.emplace_back(index, std::move(*o));
    return llvm::Error::success();
  };
  if (auto e = forEachElement(text, file, keep))
    return e;
  std::map<int64_t, StepTotals> steps;
  std::map<int64_t, std::string> deviceOfPid;
  std::set<std::string> partNames;
  // Names first: a process may be named after its slices.
  for (const auto &[i, e] : events) {
    if (e.getString("ph").getValueOr("") != "M" ||
        e.getString("name").getValueOr("") != "process_name")
      continue;
    auto pid = e.getInteger("pid");
    const llvm::json::Object *args = e.getObject("args");
    llvm::StringRef name = args ? args->getString("name").getValueOr("") : "";
    if (pid && !name.empty() && *pid != 0)
      deviceOfPid[*pid] = name.split('@').first.str();
  }
  for (const auto &[i, event] : events) {
    const llvm::json::Object *e = &event;
    auto cat = e->getString("cat");
    if (!cat || (*cat != "step" && *cat != "breakdown"))
      continue;
    const auto index = i; // a lambda may not capture a structured binding (clang 14)
    auto at = [&](const llvm::Twine &msg) {
      return oneLine(
          makeError(file + ": event " + llvm::Twine(index) + " (\"" + *cat + "\"): " + msg));
    };
    auto dur = e->getNumber("dur");
    auto pid = e->getInteger("pid");
    if (!dur || !pid || *dur < 0)
      return at("needs \"pid\" and a \"dur\" of at least 0");
    if (*cat == "step") {
      // "step 3" or "step 3 micro-step 1": the runs of one step add up.
      int64_t step = 0;
      llvm::StringRef name = e->getString("name").getValueOr("");
      if (!name.consume_front("step ") || name.split(' ').first.getAsInteger(10, step))
        return at("a step slice named \"step N\"");
      steps[step].wallUs += *dur;
      continue;
    }
    const llvm::json::Object *args = e->getObject("args");
    llvm::Optional<llvm::StringRef> part = args ? args->getString("part") : llvm::None;
    llvm::Optional<int64_t> step = args ? args->getInteger("step") : llvm::None;
    if (!part || !step)
      return at("a breakdown slice needs args \"part\" and \"step\"");
    if (*pid == 0)
      continue; // the whole step's breakdown: its parts add up to the step slices
    auto device = deviceOfPid.find(*pid);
    if (device == deviceOfPid.end())
      return at("process " + llvm::Twine(*pid) + " has no process_name (no device)");
    partNames.insert(part->str());
    steps[*step].partUs[device->second][part->str()] += *dur;
  }
  if (steps.empty())
    return makeError(file + ": no step slices (graphrun train --trace writes them)");

  return meanStep(file, steps, deviceOfPid, partNames);
}

llvm::Expected<RunTrace> readTrace(llvm::StringRef path) {
  auto text = readWhole(path, "trace");
  if (!text)
    return text.takeError();
  return parseTrace(*text, path);
}

llvm::Error checkRunMatchesPlan(const Module &plan, const RunMetrics *metrics,
                                const RunTrace *trace, std::vector<std::string> &notes) {
  const RunIdentity shown = runIdentityOf(plan);
  if (metrics && metrics->runs.empty())
    notes.push_back(metrics->file + " does not say which run it is (written before graphrun "
                                    "recorded it): not checked against the plan");
  if (metrics)
    for (const RunIdentity &run : metrics->runs) {
      // A run resumed on other devices: only the last need be the plan's.
      const bool last = &run == &metrics->runs.back();
      if (last ? !(run == shown) : run.model != shown.model)
        return makeError(metrics->file + " holds a run of " + describe(run) + "; the plan is " +
                         describe(shown));
    }
  if (trace) {
    std::vector<std::string> traced;
    for (const RunTrace::Device &d : trace->devices)
      traced.push_back(d.name);
    std::vector<std::string> planned = shown.devices;
    llvm::sort(planned);
    if (traced != planned)
      return makeError(trace->file + " traced " + joined(traced) + "; the plan places on " +
                       joined(shown.devices));
  }
  return llvm::Error::success();
}

llvm::json::Value runViewData(const RunMetrics *metrics, const RunTrace *trace) {
  llvm::json::Object run;
  if (metrics) {
    llvm::json::Array steps, evals;
    for (const RunMetrics::Step &s : metrics->steps)
      steps.push_back(llvm::json::Array{s.step, s.loss, s.lr});
    for (const RunMetrics::Eval &e : metrics->evals)
      evals.push_back(llvm::json::Array{
          e.step, e.loss, e.accuracy ? llvm::json::Value(*e.accuracy) : llvm::json::Value(nullptr)});
    run["metrics"] = llvm::json::Object{
        {"file", metrics->file}, {"steps", std::move(steps)}, {"evals", std::move(evals)}};
  }
  if (trace) {
    llvm::json::Array parts, devices;
    for (const std::string &p : trace->parts)
      parts.push_back(p);
    for (const RunTrace::Device &d : trace->devices) {
      llvm::json::Array ms;
      for (double v : d.partMs)
        ms.push_back(v);
      devices.push_back(llvm::json::Array{d.name, d.busyMs(), std::move(ms)});
    }
    run["trace"] = llvm::json::Object{
        {"file", trace->file},
        {"profiled_steps", trace->profiledSteps},
        {"averaged", llvm::json::Array{trace->firstAveraged, trace->lastAveraged}},
        {"first_step_ms", trace->firstStepMs},
        {"wall_ms", trace->wallMs},
        {"parts", std::move(parts)},
        {"devices", std::move(devices)}};
  }
  return run;
}

} // namespace graphc
