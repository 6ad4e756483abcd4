#include "passes/Pass.h"

#include "ir/Diagnostics.h"
#include "ir/OutputFile.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <chrono>

namespace graphc {

void registerBuiltinPasses(PassRegistry &r);

PassRegistry &PassRegistry::global() {
  static PassRegistry *r = [] {
    auto *reg = new PassRegistry();
    registerBuiltinPasses(*reg);
    return reg;
  }();
  return *r;
}

void PassRegistry::add(llvm::StringRef name, llvm::StringRef summary, PassFactory f) {
  entries_.push_back({name.str(), summary.str(), std::move(f)});
}

llvm::Expected<std::unique_ptr<Pass>> PassRegistry::create(llvm::StringRef name,
                                                           const CompileOptions &opts) const {
  for (const Entry &e : entries_)
    if (e.name == name)
      return e.factory(opts);
  std::vector<std::string> known;
  for (auto &[n, s] : list())
    known.push_back(n);
  return makeError("unknown pass '" + name + "'; known passes: " + llvm::join(known, ", "));
}

std::vector<std::pair<std::string, std::string>> PassRegistry::list() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Entry &e : entries_)
    out.emplace_back(e.name, e.summary);
  llvm::sort(out);
  return out;
}

llvm::Error PassManager::addPipeline(llvm::StringRef pipeline) {
  llvm::SmallVector<llvm::StringRef, 16> names;
  pipeline.split(names, ',', -1, false);
  for (llvm::StringRef n : names) {
    auto p = PassRegistry::global().create(n.trim(), opts_);
    if (!p)
      return p.takeError();
    add(std::move(*p));
  }
  return llvm::Error::success();
}

namespace {

/// Writes a dump; one that cannot be written is a warning, never a failed
/// compile. Whether it was written.
bool writeDump(const llvm::Twine &path, llvm::function_ref<void(llvm::raw_ostream &)> emit) {
  std::string text;
  llvm::raw_string_ostream os(text);
  emit(os);
  if (auto e = writeOutputFile(path.str(), os.str())) {
    llvm::errs() << "warning: dump not written: " << llvm::toString(std::move(e)) << "\n";
    return false;
  }
  return true;
}

/// The dump directory, made if need be; false (and a warning) if it cannot be.
bool makeDumpDir(llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    llvm::errs() << "warning: cannot create dump directory '" << dir << "': " << ec.message()
                 << "\n";
    return false;
  }
  return true;
}

/// "0007.after_autodiff": the dumps of pass number `index` sort in execution order.
std::string dumpStem(unsigned index, llvm::StringRef what, llvm::StringRef pass) {
  char number[16];
  snprintf(number, sizeof(number), "%04u", index);
  return (number + llvm::Twine(".") + what + "_" + pass).str();
}

} // namespace

void PassManager::dumpAfter(const Pass &p, unsigned index, const Module &m) {
  bool print = dump_.printAfterAll || llvm::is_contained(dump_.printAfter, p.name().str());
  if (print) {
    llvm::raw_ostream &os = dump_.printStream ? *dump_.printStream : llvm::errs();
    os << "// ----- IR after " << p.name() << " -----\n";
    graphc::print(m, os);
  }
  if (dump_.dumpDir.empty() || !makeDumpDir(dump_.dumpDir))
    return;
  llvm::SmallString<256> path(dump_.dumpDir);
  llvm::sys::path::append(path, dumpStem(index, "after", p.name()));
  writeDump(path + ".gir", [&](llvm::raw_ostream &os) { graphc::print(m, os); });
  if (dump_.dumpDot && dot_)
    writeDump(path + ".dot", [&](llvm::raw_ostream &os) { dot_(m, os); });
}

llvm::Error PassManager::dumpFailure(llvm::Error e, const Pass &p, unsigned index, const Module &m,
                                     bool verification) {
  if (dump_.printAfterAll || llvm::is_contained(dump_.printAfter, p.name().str())) {
    llvm::raw_ostream &os = dump_.printStream ? *dump_.printStream : llvm::errs();
    os << "// ----- IR after " << p.name() << " failed -----\n";
    graphc::print(m, os);
  }
  llvm::SmallString<256> path;
  if (!dump_.dumpDir.empty()) {
    if (!makeDumpDir(dump_.dumpDir))
      return e;
    path = dump_.dumpDir;
    llvm::sys::path::append(path, dumpStem(index, "failed", p.name()) + ".gir");
  } else if (verification) {
    int fd = -1;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("graphc-failed-" + p.name(), "gir", fd, path)) {
      llvm::errs() << "warning: dump not written: " << ec.message() << "\n";
      return e;
    }
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  } else {
    return e;
  }
  if (!writeDump(path, [&](llvm::raw_ostream &os) { graphc::print(m, os); }))
    return e;
  return makeError(llvm::toString(std::move(e)) + " (the IR it failed on: " + path + ")");
}

void PassManager::printTimings(llvm::ArrayRef<Timing> timings) const {
  llvm::raw_ostream &os = dump_.printStream ? *dump_.printStream : llvm::errs();
  double total = 0;
  for (const Timing &t : timings)
    total += t.runSeconds + t.verifySeconds;
  os << "pass timings (wall clock; verify runs after a pass that changed the module, and a verify "
        "pass\n  does not run again on a module verified since its last change)\n"
     << "  pass                       run ms  verify ms   share      nodes\n";
  for (const Timing &t : timings)
    os << llvm::format("  %-22s %10.2f %10.2f %6.1f%% %10zu\n", t.pass.c_str(), 1e3 * t.runSeconds,
                       1e3 * t.verifySeconds,
                       total > 0 ? 100 * (t.runSeconds + t.verifySeconds) / total : 0.0,
                       t.nodesAfter);
  os << llvm::format("  total                  %10.2f\n", 1e3 * total);
}

llvm::Error PassManager::run(Module &m) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  std::vector<Timing> timings;
  unsigned index = 0;
  // Whether the module passed verification and no pass changed it since: a
  // `verify` pass then has nothing to find (on inception_v3 with 8 towers a
  // verification takes as long as a small pass).
  bool verified = false;
  for (auto &p : passes_) {
    Timing t{p->name().str()};
    if (verified && p->name() == "verify") {
      t.nodesAfter = m.main().numNodes();
      timings.push_back(std::move(t));
      dumpAfter(*p, ++index, m);
      continue;
    }
    auto start = Clock::now();
    auto changed = p->run(m);
    auto ran = Clock::now();
    t.runSeconds = seconds(start, ran);
    if (!changed)
      return dumpFailure(withContext(changed.takeError(), "pass '" + p->name() + "'"), *p,
                         index + 1, m, /*verification=*/false);
    if (*changed) {
      if (auto e = verify(m))
        return dumpFailure(
            withContext(std::move(e), "IR failed verification after pass '" + p->name() + "'"), *p,
            index + 1, m, /*verification=*/true);
      verified = true;
    } else if (p->name() == "verify") {
      verified = true;
    }
    t.verifySeconds = seconds(ran, Clock::now());
    t.nodesAfter = m.main().numNodes();
    timings.push_back(std::move(t));
    dumpAfter(*p, ++index, m);
  }
  if (dump_.timePasses)
    printTimings(timings);
  return llvm::Error::success();
}

} // namespace graphc
