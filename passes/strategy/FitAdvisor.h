//===- FitAdvisor.h - What would make a plan that does not fit, fit -*- C++ -*-===//
//
// compileThatFits() is compilePlan (CompilePlan.h) and the memory check
// (checkPlanFitsCluster) in one. A plan that does not fit, or a strategy
// that found none that fits, is a MemoryMisfit (placement/analysis/
// MemoryNeeds.h): each device's need in parts against its memory. To it
// the advisor adds the cheapest change that makes the plan fit, found by
// compiling the changes, never by a ratio alone:
//
//   options   the kinds of change in fitOptions() (FitOptions.h): another
//             --params mode, --strategy model-parallel, --accumulate with the
//             same samples per update, more GPUs, a smaller batch. Each edit
//             is compiled with the request's other flags (compile only:
//             nothing trains, nothing is dumped) and checked as graphc place
//             checks; an edit whose compile fails for another reason does
//             not fit.
//   cheapest  the change that alters the user's training least: first by
//             FitChange (the same update on the same devices, then on more
//             devices, then a smaller batch), then by the step simulator's
//             predicted time per sample (an update's K-1 micro-steps and its
//             last step, over its samples), then by list order. A kind of
//             change is only searched while no change of an earlier
//             FitChange fits.
//   cost      at most FitAdvisorOptions::maxCompiles compiles, none started
//             after maxSeconds; a search the budget stops reports what it
//             found so far (docs/placement.md gives the time this adds to
//             a refusal).
//
// The advice names one change ("would fit with: --batch 24 --accumulate 2
// (...)"), the others of its class that fit, or what was tried when none
// does.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/strategy/FitOptions.h"

#include <memory>
#include <optional>

namespace graphc {

/// The advisor's budget: no compile starts once either is spent (the first
/// always runs, so a refusal names a change whenever the first edit fits).
struct FitAdvisorOptions {
  unsigned maxCompiles = 16;
  double maxSeconds = 10; ///< wall clock, from the advisor's start; 0: none

  /// The defaults, with maxSeconds from $GRAPHC_FIT_ADVICE_SECONDS when set
  /// (0 turns the clock off, so that the advice depends on nothing but the
  /// request: the tests do that on loaded machines). An error names a value
  /// that is not a number >= 0.
  static llvm::Expected<FitAdvisorOptions> fromEnvironment();
};

/// One change that fits, with the step simulator's prediction.
struct FitFound {
  RequestEdit edit; ///< its flags, what it means, and the change itself
  FitChange change = FitChange::SameTraining;
  double updateSeconds = 0; ///< predicted time of one update
  int64_t samplesPerUpdate = 0;
  double secondsPerSample() const {
    return samplesPerUpdate ? updateSeconds / (double)samplesPerUpdate : updateSeconds;
  }
};

struct FitAdvice {
  std::vector<FitFound> fits;     ///< cheapest first
  std::vector<std::string> tried; ///< what was compiled and did not fit, per kind
  unsigned compiles = 0;
  bool budgetSpent = false;
  double seconds = 0;
  /// "would fit with: <flags> (<what>; predicted ...); also fits: ...
  /// (N compiles, T s)" or "no change tried fits: ...".
  std::string text() const;
};

/// Searches fitOptions() for changes to `req`/`place` whose plan fits.
FitAdvice adviseFit(const Module &forward, const CompileRequest &req, const PlacementRequest &place,
                    const MemoryMisfit &misfit, const FitAdvisorOptions &options = {});

/// compilePlan, then checkPlanFitsCluster; a MemoryMisfit from either gets
/// the advice of adviseFit. Other errors pass unchanged.
llvm::Expected<std::unique_ptr<Module>> compileThatFits(const Module &forward,
                                                        const CompileRequest &req,
                                                        const PlacementRequest &place,
                                                        const FitAdvisorOptions &options = {});

} // namespace graphc
