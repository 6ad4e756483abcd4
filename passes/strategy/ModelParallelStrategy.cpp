#include "passes/strategy/ModelParallelStrategy.h"

#include "ir/Clone.h"
#include "ir/Diagnostics.h"
#include "passes/strategy/Compile.h"
#include "passes/strategy/RecomputeMeasures.h"
#include "placement/ModelParallel.h"
#include "placement/Placer.h"
#include "placement/analysis/MemoryNeeds.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <memory>

namespace graphc {

namespace {

/// Schedules tried: after each whose executor plan does not fit, every
/// device that overflowed gets its share of memory scaled by capacity / need
/// (less 5%), the others keep theirs.
constexpr int kAttempts = 8;
constexpr double kSmallestShare = 0.05;

std::string planJson(const ModelParallelPlan &p, const ModelParallelOptions &o, double seconds) {
  llvm::json::Array devices;
  for (const ModelParallelDevice &d : p.devices)
    if (d.nodes)
      devices.push_back(llvm::json::Object{{"device", d.device},
                                           {"nodes", d.nodes},
                                           {"persistent_bytes", d.persistentBytes},
                                           {"peak_bytes", d.peakBytes},
                                           {"busy_seconds", d.busySeconds},
                                           {"memory_share", o.shareOf(d.device)}});
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(llvm::json::Object{{"order", scheduleOrderName(p.order)},
                                             {"step_seconds", p.stepSeconds},
                                             {"schedule_seconds", seconds},
                                             {"devices", std::move(devices)}});
  return os.str();
}

llvm::Error checkRequest(const CompileRequest &req, const PlacementRequest &place) {
  if (place.workers > 1 || place.tasks || place.psTasks() > 0)
    return makeError("--strategy model-parallel places one process's replica: several workers "
                     "or ps tasks are not supported with it");
  if (place.towers && *place.towers > 0)
    return makeError("--strategy model-parallel spreads one replica over the devices; towers "
                     "(--towers " +
                     llvm::Twine(*place.towers) + ") are not combined with it");
  if (req.options.split.kind != SplitSpec::Even)
    return makeError("--split shares the batch among towers; --strategy model-parallel has none");
  return llvm::Error::success();
}

/// The scheduler's refusal (a MemoryMisfit), kept beside the pass manager,
/// which passes errors on as text.
struct Refusal {
  std::string headline;
  std::vector<MemoryNeed> needs;
  std::unique_ptr<MemoryMisfit> error() {
    auto e = std::make_unique<MemoryMisfit>(std::move(headline), std::move(needs));
    e->setEstimated();
    return e;
  }
};

/// The placer of one attempt: m-ETF under the memory shares `mo`, its
/// schedule recorded in the plan, then the placer proper for what m-ETF
/// leaves (colocation, kernels). A refusal for memory is also kept in
/// `refused`.
PlacerFunction scheduleAndPlace(const Cluster &cluster, const ModelParallelOptions &mo,
                                const PlacerOptions &po, std::shared_ptr<Refusal> refused) {
  return [cluster, mo, po, refused](Module &m) -> llvm::Error {
    auto start = std::chrono::steady_clock::now();
    auto plan = placeModelParallel(m, cluster, kernelFor, mo);
    if (!plan) {
      llvm::Error e = llvm::handleErrors(plan.takeError(),
                                         [&](std::unique_ptr<MemoryMisfit> misfit) -> llvm::Error {
                                           *refused = Refusal{misfit->headline(), misfit->needs()};
                                           return llvm::Error(std::move(misfit));
                                         });
      return withContext(std::move(e), "--strategy model-parallel");
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    m.plan().modelParallel = planJson(*plan, mo, seconds);
    return Placer(cluster, kernelFor, po).run(m);
  };
}

/// Lowers the memory share of every device that did not fit; false when
/// a share is below kSmallestShare (no schedule left to try).
bool lowerShares(llvm::ArrayRef<MemoryNeed> needs, ModelParallelOptions &mo) {
  bool lower = false;
  for (const MemoryNeed &n : needs)
    if (!n.fits()) {
      double &share = mo.memoryShares.try_emplace(n.device, 1.0).first->second;
      share *= 0.95 * (double)n.capacity / (double)n.total();
      lower = share >= kSmallestShare;
    }
  return lower;
}

/// Compiles with one list schedule, lowering the memory shares of devices
/// whose executor plan does not fit, up to kAttempts schedules. A
/// MemoryMisfit with the last plan's figures when none fits.
llvm::Expected<std::unique_ptr<Module>> compileWithOrder(const Module &forward, CompileRequest req,
                                                         const Cluster &cluster,
                                                         const PlacerOptions &po,
                                                         ScheduleOrder order) {
  std::vector<MemoryNeed> lastNeeds;
  ModelParallelOptions mo;
  mo.order = order;
  setRecomputeMeasures(req.options, cluster);
  std::vector<llvm::StringRef> pipelines{trainingPipeline(req), kPlacementPipeline};
  llvm::append_range(pipelines, recomputePipelines(req.options));
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto refused = std::make_shared<Refusal>();
    req.options.placer = scheduleAndPlace(cluster, mo, po, refused);
    std::unique_ptr<Module> m = cloneModule(forward);
    m->plan().cluster = cluster;
    m->plan().strategy = Strategy::ModelParallel;
    // The memory orders' steps are sequential anyway: a sender may wait for
    // the copies of what it sent, and free it then.
    if (order != ScheduleOrder::EarliestStart)
      m->plan().releaseSent = true;
    llvm::Error compiled = runPipelines(*m, req.options, req.dump, pipelines);
    if (compiled && lastNeeds.empty() && !refused->needs.empty()) {
      llvm::consumeError(std::move(compiled));
      refused->headline = (scheduleOrderName(order) + ": " + refused->headline).str();
      return llvm::Error(refused->error());
    }
    if (compiled && lastNeeds.empty())
      return compiled;
    if (compiled) { // less memory than a plan that did not fit: that plan's figures say more
      llvm::consumeError(std::move(compiled));
      break;
    }
    auto needs = memoryNeeds(*m);
    if (!needs)
      return needs.takeError();
    if (llvm::all_of(*needs, [](const MemoryNeed &n) { return n.fits(); })) {
      keepForwardGraph(forward, *m);
      return m;
    }
    lastNeeds = std::move(*needs);
    if (!lowerShares(lastNeeds, mo))
      break;
  }
  return llvm::make_error<MemoryMisfit>(
      (scheduleOrderName(order) + ": no schedule fits (scheduled to fill less of each device's "
                                  "memory, the executor's plan still needs more than it has)")
          .str(),
      std::move(lastNeeds));
}

/// Whether refusal `a` came closer to fitting than `b`: the executor's plan
/// before the scheduler's estimate, then the smaller shortfall.
bool closerThan(const MemoryMisfit &a, const MemoryMisfit &b) {
  return std::make_pair(a.estimated(), shortfall(a.needs())) <
         std::make_pair(b.estimated(), shortfall(b.needs()));
}

/// One error for both schedules' failures: a MemoryMisfit with the figures
/// of the plan that came closer when either is one, the other's said after
/// them; otherwise both messages.
llvm::Error bothRefused(llvm::Error etf, llvm::Error memory) {
  std::unique_ptr<MemoryMisfit> misfits[2];
  std::string texts[2];
  llvm::Error errors[2] = {std::move(etf), std::move(memory)};
  for (int i = 0; i < 2; ++i)
    llvm::handleAllErrors(
        std::move(errors[i]), [&](std::unique_ptr<MemoryMisfit> m) { misfits[i] = std::move(m); },
        [&](const llvm::ErrorInfoBase &e) { texts[i] = e.message(); });
  if (!misfits[0] && !misfits[1])
    return makeError("--strategy model-parallel: m-ETF: " + texts[0] +
                     "; memory order: " + texts[1]);
  // The plan shown: the one misfit, or of two the executor's plan before
  // the scheduler's estimate, then the one whose fullest device lacks less
  // (the memory order on a tie).
  const int shown =
      !misfits[0] ? 1 : !misfits[1] ? 0 : (closerThan(*misfits[0], *misfits[1]) ? 0 : 1);
  const int other = 1 - shown;
  std::string otherText = (other == 0 ? "m-ETF: " : "memory order: ") + texts[other];
  if (misfits[other]) {
    otherText = misfits[other]->headline();
    if (const MemoryNeed *worst = misfits[other]->worst())
      otherText += "; its fullest device: " + worst->brief();
  }
  auto both = std::make_unique<MemoryMisfit>(
      "--strategy model-parallel: neither list schedule fits; " + misfits[shown]->headline(),
      misfits[shown]->needs(), otherText);
  if (misfits[shown]->estimated())
    both->setEstimated();
  return llvm::Error(std::move(both));
}

/// The segmented memory order's plan, or when it does not fit either, the
/// refusal of the two memory orders whose figures come closer: the
/// executor's plan before the scheduler's estimate, then the smaller
/// shortfall (the plain memory order's on a tie, or when either is not a
/// MemoryMisfit).
llvm::Expected<std::unique_ptr<Module>> closerOf(llvm::Error plain,
                                                 llvm::Expected<std::unique_ptr<Module>> segmented) {
  if (segmented) {
    llvm::consumeError(std::move(plain));
    return segmented;
  }
  std::unique_ptr<MemoryMisfit> misfits[2];
  llvm::Error errors[2] = {std::move(plain), segmented.takeError()};
  for (int i = 0; i < 2; ++i)
    errors[i] = llvm::handleErrors(std::move(errors[i]),
                                   [&](std::unique_ptr<MemoryMisfit> m) -> llvm::Error {
                                     misfits[i] = std::move(m);
                                     return llvm::Error::success();
                                   });
  if (misfits[0] && misfits[1] && closerThan(*misfits[1], *misfits[0])) {
    llvm::consumeError(std::move(errors[0]));
    llvm::consumeError(std::move(errors[1]));
    return llvm::Error(std::move(misfits[1]));
  }
  llvm::consumeError(std::move(errors[1]));
  if (misfits[0]) {
    llvm::consumeError(std::move(errors[0]));
    return llvm::Error(std::move(misfits[0]));
  }
  return std::move(errors[0]);
}

double predictedStep(const Module &m) {
  auto parsed = llvm::json::parse(m.plan().modelParallel.value_or(""));
  if (!parsed || !parsed->getAsObject()) {
    llvm::consumeError(parsed.takeError());
    return 0;
  }
  return parsed->getAsObject()->getNumber("step_seconds").getValueOr(0);
}

/// Records in the chosen plan's summary the other schedule: its predicted
/// step, or that it did not fit.
void noteAlternative(Module &chosen, ScheduleOrder other, std::optional<double> otherStep) {
  auto parsed = llvm::json::parse(chosen.plan().modelParallel.value_or(""));
  if (!parsed || !parsed->getAsObject()) {
    llvm::consumeError(parsed.takeError());
    return;
  }
  llvm::json::Object alternative{{"order", scheduleOrderName(other)}, {"fits", bool(otherStep)}};
  if (otherStep)
    alternative["step_seconds"] = *otherStep;
  (*parsed->getAsObject())["alternative"] = std::move(alternative);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << *parsed;
  chosen.plan().modelParallel = os.str();
}

} // namespace

/// m-ETF and the memory order are compiled: m-ETF overlaps independent
/// branches for the shorter step, the memory order holds about what one
/// device would; when the memory order's plan does not fit, the segmented
/// memory order (the forward pass cut into one segment per GPU) takes its
/// place. The faster of those whose executor plan fits is kept (m-ETF on a
/// tie).
llvm::Expected<std::unique_ptr<Module>>
ModelParallelStrategy::compile(const Module &forward, const CompileRequest &request,
                               const PlacementRequest &place) const {
  if (auto e = checkRequest(request, place))
    return e;
  auto cluster = clusterFor(place);
  if (!cluster)
    return cluster.takeError();
  CompileRequest req = request;
  req.options.towers = 0;
  req.options.fuseBatchNormReluGradients = cluster->numGpus() > 0;
  if (req.options.batch <= 0 && !forward.batch())
    req.options.batch = kDefaultBatch;
  PlacerOptions po;
  po.softPlacement = place.softPlacement;
  auto etf = compileWithOrder(forward, req, *cluster, po, ScheduleOrder::EarliestStart);
  auto memory = compileWithOrder(forward, req, *cluster, po, ScheduleOrder::MemoryOrder);
  if (!memory) // the forward cut into segments: slower, and fits more
    memory = closerOf(memory.takeError(), compileWithOrder(forward, req, *cluster, po,
                                                           ScheduleOrder::SegmentedMemoryOrder));
  if (!etf && !memory)
    return bothRefused(etf.takeError(), memory.takeError());
  if (etf && memory) {
    double etfStep = predictedStep(**etf), memoryStep = predictedStep(**memory);
    if (memoryStep < etfStep) {
      noteAlternative(**memory, ScheduleOrder::EarliestStart, etfStep);
      return std::move(*memory);
    }
    noteAlternative(**etf, ScheduleOrder::MemoryOrder, memoryStep);
    return std::move(*etf);
  }
  if (etf) {
    llvm::consumeError(memory.takeError());
    noteAlternative(**etf, ScheduleOrder::MemoryOrder, std::nullopt);
    return std::move(*etf);
  }
  llvm::consumeError(etf.takeError());
  noteAlternative(**memory, ScheduleOrder::EarliestStart, std::nullopt);
  return std::move(*memory);
}

std::string describeModelParallel(const Module &plan) {
  if (plan.plan().strategy != Strategy::ModelParallel)
    return "";
  auto parsed = llvm::json::parse(plan.plan().modelParallel.value_or(""));
  if (!parsed || !parsed->getAsObject()) {
    llvm::consumeError(parsed.takeError());
    return "model-parallel";
  }
  const llvm::json::Object &o = *parsed->getAsObject();
  std::string each;
  if (const llvm::json::Array *devices = o.getArray("devices"))
    for (const llvm::json::Value &v : *devices)
      if (const llvm::json::Object *d = v.getAsObject()) {
        double share = d->getNumber("memory_share").getValueOr(1);
        each += llvm::formatv("{0}{1} {2} nodes, {3:f1} MiB", each.empty() ? "" : "; ",
                              d->getString("device").getValueOr(""),
                              std::to_string(d->getInteger("nodes").getValueOr(0)),
                              d->getInteger("peak_bytes").getValueOr(0) / 1048576.0)
                    .str();
        if (share < 1)
          each += llvm::formatv(" (scheduled within {0:P0} of its memory)", share).str();
      }
  std::string why;
  if (const llvm::json::Object *alt = o.getObject("alternative")) {
    std::string other = alt->getString("order").getValueOr("").str();
    if (!alt->getBoolean("fits").getValueOr(false))
      why = "; " + other + " did not fit";
    else
      why = llvm::formatv("; {0} predicted {1:f2} ms", other,
                          alt->getNumber("step_seconds").getValueOr(0) * 1e3)
                .str();
  }
  return llvm::formatv("model-parallel ({0}): predicted step {1:f2} ms, scheduled in {2:f3} s; "
                       "{3} (estimated peaks){4}",
                       o.getString("order").getValueOr("m-ETF"),
                       o.getNumber("step_seconds").getValueOr(0) * 1e3,
                       o.getNumber("schedule_seconds").getValueOr(0), each, why)
      .str();
}

} // namespace graphc
