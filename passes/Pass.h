//===- Pass.h - Passes, the registry, and the pass manager -------*- C++ -*-===//
//
// A pass is a small class with one entry point that returns whether it changed
// the module; its work is a free function in its own file that tests call
// directly. Passes are registered by kebab-case name; a pipeline is a comma
// list of names (kDefaultTrainingPipeline is the one written down once).
//
// The pass manager runs a pipeline, verifies the module after every pass that
// changed it ("failed after <pass>: ..."), and, when asked, prints the IR after
// every pass or named passes and writes one numbered file per pass to a dump
// directory (NNNN.after_<pass>.gir, plus .dot where asked). A dump that cannot
// be written is a warning, never a failed compile.
//
// A pass that fails, or leaves a module the verifier refuses, has the module
// as it left it dumped (MLIR's print-IR-after-failure), and the error names
// the file: NNNN.failed_<pass>.gir in the dump directory when there is one
// (printed too, under the print options); without one, a verifier's refusal
// (a pass broke the IR: a compiler bug) goes to a file in the system's
// temporary directory, while a pass's own error (what a user's input can
// cause, naming its node) writes nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "passes/CompileOptions.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>

namespace graphc {

class Pass {
public:
  virtual ~Pass() = default;
  virtual llvm::StringRef name() const = 0;
  /// Runs on the module; true if anything changed.
  virtual llvm::Expected<bool> run(Module &m) = 0;
};

using PassFactory = std::function<std::unique_ptr<Pass>(const CompileOptions &)>;

class PassRegistry {
public:
  /// The registry with every built-in pass.
  static PassRegistry &global();
  void add(llvm::StringRef name, llvm::StringRef summary, PassFactory f);
  llvm::Expected<std::unique_ptr<Pass>> create(llvm::StringRef name,
                                               const CompileOptions &opts) const;
  /// (name, summary) in name order.
  std::vector<std::pair<std::string, std::string>> list() const;

private:
  struct Entry {
    std::string name, summary;
    PassFactory factory;
  };
  std::vector<Entry> entries_;
};

/// A pass whose work is a free function of the module, its own options (if
/// any) bound in by its factory: `fn(Module&, const TowerOptions&)`.
class FunctionPass : public Pass {
public:
  using Fn = std::function<llvm::Expected<bool>(Module &)>;
  FunctionPass(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  llvm::StringRef name() const override { return name_; }
  llvm::Expected<bool> run(Module &m) override { return fn_(m); }

private:
  std::string name_;
  Fn fn_;
};

struct DumpOptions {
  bool printAfterAll = false;
  std::vector<std::string> printAfter; ///< pass names
  std::string dumpDir;                 ///< numbered files per pass when set
  bool dumpDot = false;                ///< also NNNN.after_<pass>.dot
  bool timePasses = false;             ///< a wall-time table of the passes after the run
  llvm::raw_ostream *printStream = nullptr; ///< defaults to stderr
};

class PassManager {
public:
  explicit PassManager(CompileOptions opts = {}, DumpOptions dump = {})
      : opts_(std::move(opts)), dump_(std::move(dump)) {}

  void add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  /// Adds the passes of a comma-separated pipeline; unknown names are an error
  /// that lists the known ones.
  llvm::Error addPipeline(llvm::StringRef pipeline);
  /// Runs every pass; verifies after each one that changed the module. A
  /// `verify` pass is skipped when the module passed verification and no
  /// pass changed it since (it could find nothing).
  llvm::Error run(Module &m);

  /// Renders a module as DOT; set by placement-aware code (colours by device).
  using DotWriter = std::function<void(const Module &, llvm::raw_ostream &)>;
  void setDotWriter(DotWriter w) { dot_ = std::move(w); }

private:
  void dumpAfter(const Pass &p, unsigned index, const Module &m);
  /// The failure dump (above) of pass number `index`; the error gets the
  /// file's name.
  llvm::Error dumpFailure(llvm::Error e, const Pass &p, unsigned index, const Module &m,
                          bool verification);
  struct Timing {
    std::string pass;
    double runSeconds = 0, verifySeconds = 0;
    size_t nodesAfter = 0;
  };
  void printTimings(llvm::ArrayRef<Timing> timings) const;

  CompileOptions opts_;
  DumpOptions dump_;
  DotWriter dot_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

/// The pipeline `graphc` runs for training, written down once.
extern const char *const kDefaultTrainingPipeline;
/// What `graphc place` runs after the training pipeline (needs
/// CompileOptions::placer).
extern const char *const kPlacementPipeline;
/// The pipeline for inference compiles (no loss, no gradients): the batch
/// bound and the inference fusions (InferenceFusion.h).
extern const char *const kDefaultInferencePipeline;

} // namespace graphc
