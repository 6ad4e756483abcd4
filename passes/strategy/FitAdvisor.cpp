//===- FitAdvisor.cpp - Changes that fit, found by compiling ---------------===//

#include "passes/strategy/FitAdvisor.h"

#include "ir/Diagnostics.h"
#include "passes/AccumulateGradients.h"
#include "passes/strategy/CompilePlan.h"
#include "passes/strategy/CompiledModule.h"
#include "placement/analysis/StepSimulator.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <limits>
#include <numeric>

namespace graphc {

namespace {

/// The predicted time of one update of a placed plan (`runnable`, on
/// `cluster`): its last step (graph main) and, accumulating, its K-1
/// micro-steps.
llvm::Expected<double> predictedUpdate(const Module &runnable, const Cluster &cluster) {
  auto step = simulateStep(runnable, cluster);
  if (!step)
    return step.takeError();
  double seconds = step->stepSeconds;
  const int64_t k = runnable.plan().accumulate.value_or(1);
  if (k > 1) {
    SimOptions micro;
    micro.graph = kMicroGraph.str();
    auto m = simulateStep(runnable, cluster, micro);
    if (!m)
      return m.takeError();
    seconds += (double)(k - 1) * m->stepSeconds;
  }
  return seconds;
}

/// Compiles edited requests within a budget.
class Prober {
public:
  Prober(const FitContext &c, const FitAdvisorOptions &budget)
      : c_(c), budget_(budget), start_(std::chrono::steady_clock::now()) {}

  bool spent() const {
    return compiles_ >= budget_.maxCompiles ||
           (compiles_ > 0 && budget_.maxSeconds > 0 && seconds() >= budget_.maxSeconds);
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  unsigned compiles() const { return compiles_; }

  /// The change, when the edited request's plan compiles and fits.
  std::optional<FitFound> probe(const RequestEdit &edit, FitChange change) {
    ++compiles_;
    CompileRequest req = c_.req;
    PlacementRequest place = c_.place;
    req.dump = DumpOptions(); // compile only
    place.searchBuckets = false;
    edit.apply(req, place);
    auto plan = compilePlan(c_.forward, req, place);
    if (!plan) {
      llvm::consumeError(plan.takeError());
      return std::nullopt;
    }
    // As checkPlanFitsCluster, on the one copy the simulator reads too; a
    // plan without devices is not an answer.
    std::unique_ptr<Module> runnable = runnablePart(**plan);
    if (!runnable->plan().cluster)
      return std::nullopt;
    auto needs = memoryNeeds(*runnable);
    if (!needs || !llvm::all_of(*needs, [](const MemoryNeed &n) { return n.fits(); })) {
      if (!needs)
        llvm::consumeError(needs.takeError());
      return std::nullopt;
    }
    FitFound found{edit, change};
    const int64_t k = runnable->plan().accumulate.value_or(1);
    found.samplesPerUpdate = runnable->batch().value_or(0) * k;
    auto seconds = predictedUpdate(*runnable, *runnable->plan().cluster);
    if (seconds) {
      found.updateSeconds = *seconds;
    } else { // fits, and is ranked last of its class
      llvm::consumeError(seconds.takeError());
      found.updateSeconds = std::numeric_limits<double>::infinity();
    }
    return found;
  }

private:
  const FitContext &c_;
  FitAdvisorOptions budget_;
  std::chrono::steady_clock::time_point start_;
  unsigned compiles_ = 0;
};

/// Every edit of an unordered kind.
void searchEach(const FitOptionKind &kind, const EditList &edits, Prober &prober,
                FitAdvice &advice) {
  for (size_t i = 0; i < edits.size; ++i) {
    RequestEdit e = edits.at(i);
    if (prober.spent()) {
      advice.budgetSpent = true;
      return;
    }
    if (auto found = prober.probe(e, kind.change))
      advice.fits.push_back(std::move(*found));
    else
      advice.tried.push_back(e.flags);
  }
}

/// The first edit of an ordered kind that fits: from the guess, galloping
/// (1, 2, 4, ... edits) towards the boundary, then bisecting; the answer is
/// proven when the edit before it was compiled and does not fit.
void searchFirst(const FitContext &c, const FitOptionKind &kind, const EditList &edits,
                 Prober &prober, FitAdvice &advice) {
  const long n = (long)edits.size;
  long lo = -1, hi = n; // lo does not fit, hi fits (n: none known to)
  std::optional<FitFound> best;
  auto probeAt = [&](long i) {
    if (auto found = prober.probe(edits.at((size_t)i), kind.change)) {
      hi = i;
      best = std::move(found);
      return true;
    }
    lo = i;
    return false;
  };
  long start = kind.guess ? (long)kind.guess(c, edits.size) : 0;
  if (prober.spent()) {
    advice.budgetSpent = true;
    return;
  }
  const bool down = probeAt(std::clamp(start, 0L, n - 1));
  bool bisect = false;
  long step = 1;
  while (hi - lo > 1) {
    if (prober.spent()) {
      advice.budgetSpent = true;
      break;
    }
    long i = down ? hi - step : lo + step;
    step *= 2;
    if (bisect || i <= lo || i >= hi)
      i = lo + (hi - lo) / 2;
    if (probeAt(i) != down)
      bisect = true;
  }
  if (best) {
    if (hi - lo > 1)
      best->edit.what += " (an earlier option may fit too: the search stopped at its budget)";
    advice.fits.push_back(std::move(*best));
  } else if (lo == n - 1) {
    advice.tried.push_back(edits.at(edits.size - 1).flags);
  }
}

/// The cluster of every worker's GPUs (as the data-parallel strategy
/// builds it).
llvm::Expected<Cluster> wholeCluster(const PlacementRequest &place) {
  std::vector<unsigned> gpus = place.workerGpus();
  PlacementRequest whole = place;
  if (gpus.size() > 1 || place.tasks)
    whole.gpus = (int)std::accumulate(gpus.begin(), gpus.end(), 0u);
  return clusterFor(whole);
}

/// The global batch a request's step has.
int64_t globalBatch(const Module &forward, const CompileRequest &req) {
  if (req.options.batch > 0)
    return req.options.batch;
  if (forward.batch())
    return *forward.batch();
  return kDefaultBatch;
}

std::string predicted(double seconds) {
  if (seconds == std::numeric_limits<double>::infinity())
    return "no prediction";
  char text[48];
  std::snprintf(text, sizeof text, "predicted %.2f ms per update", seconds * 1e3);
  return text;
}

} // namespace

std::string FitAdvice::text() const {
  char spent[32];
  std::snprintf(spent, sizeof spent, "%.1f s", seconds);
  std::string cost = "[fit advisor: " + std::to_string(compiles) +
                     (compiles == 1 ? " compile, " : " compiles, ") + spent +
                     (budgetSpent ? ", its budget spent]" : "]");
  if (fits.empty())
    return "no change tried fits" +
           (tried.empty() ? std::string() : " (" + llvm::join(tried, "; ") + ")") + " " + cost;
  const FitFound &first = fits.front();
  std::string text = "would fit with: " + first.edit.flags + " (" + first.edit.what + "; " +
                     predicted(first.updateSeconds) + ")";
  std::vector<std::string> others;
  for (size_t i = 1; i < fits.size(); ++i)
    others.push_back(fits[i].edit.flags + " (" + predicted(fits[i].updateSeconds) + ")");
  if (!others.empty())
    text += "; also fits: " + llvm::join(others, ", ");
  return text + " " + cost;
}

FitAdvice adviseFit(const Module &forward, const CompileRequest &req, const PlacementRequest &place,
                    const MemoryMisfit &misfit, const FitAdvisorOptions &options) {
  auto start = std::chrono::steady_clock::now();
  FitAdvice advice;
  auto cluster = wholeCluster(place);
  if (!cluster || !misfit.worst()) {
    if (!cluster)
      llvm::consumeError(cluster.takeError());
    return advice;
  }
  const int64_t batch = globalBatch(forward, req);
  const bool given = req.options.batch > 0 || forward.batch();
  FitContext c{forward, req, place, *cluster, batch, given, std::max(1u, req.options.accumulate),
               misfit};
  // Every edit keeps the batch unless it changes it: more towers would
  // otherwise take the default per tower.
  c.req.options.batch = given ? req.options.batch : batch;
  Prober prober(c, options);
  // The kinds by how much they change the training; a later class is
  // searched only while nothing fits.
  std::vector<const FitOptionKind *> kinds;
  for (const FitOptionKind &k : fitOptions())
    kinds.push_back(&k);
  llvm::stable_sort(
      kinds, [](const FitOptionKind *a, const FitOptionKind *b) { return a->change < b->change; });
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0 && kinds[i]->change != kinds[i - 1]->change && !advice.fits.empty())
      break;
    EditList edits = kinds[i]->edits(c);
    if (edits.size == 0)
      continue;
    if (kinds[i]->ordered)
      searchFirst(c, *kinds[i], edits, prober, advice);
    else
      searchEach(*kinds[i], edits, prober, advice);
  }
  // Cheapest first: the class, then the predicted time per sample; the
  // list's order on a tie (stable).
  llvm::stable_sort(advice.fits, [](const FitFound &a, const FitFound &b) {
    if (a.change != b.change)
      return a.change < b.change;
    return a.secondsPerSample() < b.secondsPerSample();
  });
  advice.compiles = prober.compiles();
  advice.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return advice;
}

llvm::Expected<FitAdvisorOptions> FitAdvisorOptions::fromEnvironment() {
  FitAdvisorOptions o;
  const char *text = std::getenv("GRAPHC_FIT_ADVICE_SECONDS");
  if (!text)
    return o;
  double seconds = 0;
  if (llvm::StringRef(text).trim().getAsDouble(seconds) || !(seconds >= 0) || std::isinf(seconds))
    return makeError("GRAPHC_FIT_ADVICE_SECONDS '" + printable(text) +
                     "': expected seconds, a number >= 0 (0: no time limit)");
  o.maxSeconds = seconds;
  return o;
}

llvm::Expected<std::unique_ptr<Module>> compileThatFits(const Module &forward,
                                                        const CompileRequest &req,
                                                        const PlacementRequest &place,
                                                        const FitAdvisorOptions &options) {
  auto plan = compilePlan(forward, req, place);
  llvm::Error e = plan ? checkPlanFitsCluster(**plan) : plan.takeError();
  if (!e)
    return plan;
  return llvm::handleErrors(std::move(e), [&](std::unique_ptr<MemoryMisfit> m) -> llvm::Error {
    m->setAdvice(adviseFit(forward, req, place, *m, options).text());
    return llvm::Error(std::move(m));
  });
}

} // namespace graphc
