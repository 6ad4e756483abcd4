//===- graphc.cpp - The compiler's command line ----------------------------===//
//
//   graphc inspect  [MODEL | --model NAME] [--batch N] [--json]
//   graphc print    [MODEL | --model NAME] [--batch N] [--weights] [-o FILE]
//   graphc export   [MODEL | --model NAME] -o FILE.onnx
//   graphc compile  [MODEL | --model NAME] --batch N [--pipeline a,b] [--dump-dir D] -o FILE
//   graphc place    [MODEL | --model NAME] --gpus N [--workers W | --tasks FILE]
//                   [--ps P] [--ps-async] --batch B [--params P] -o FILE [--explain]
//   graphc view     PLACED -o FILE.html | .svg | .dot
//                   [--metrics RUN.jsonl] [--trace TRACE.json]    (.html only)
//   graphc passes
//   graphc simulate PLACED [--json]
//   graphc simulate [MODEL | --model NAME] --gpus 1,2,...,1024 [--workers-of 8]
//
// Every subcommand is a struct: add() declares its flags (the ones graphrun
// shares come from tools/driver/FlagGroups.h), run() makes a few calls into
// the libraries; errors print one line and exit non-zero.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxExporter.h"
#include "ir/Archive.h"
#include "ir/Diagnostics.h"
#include "ir/ModelSummary.h"
#include "ir/OutputFile.h"
#include "ir/Printer.h"
#include "ir/ShapeInference.h"
#include "passes/strategy/Compile.h"
#include "passes/strategy/CompiledModule.h"
#include "passes/strategy/DataParallelStrategy.h"
#include "passes/strategy/FitAdvisor.h"
#include "passes/strategy/ModelParallelStrategy.h"
#include "passes/strategy/PipelineStrategy.h"
#include "passes/strategy/ParamsAutoStrategy.h"
#include "placement/CostReport.h"
#include "placement/DotView.h"
#include "placement/HtmlView.h"
#include "placement/Placer.h"
#include "placement/RunView.h"
#include "tools/driver/CommandLine.h"
#include "tools/driver/FlagGroups.h"
#include "tools/driver/Inspect.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/RecomputeReport.h"
#include "tools/driver/RunChecks.h"
#include "tools/driver/ScalingTable.h"
#include "tools/driver/Simulate.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>

using namespace graphc;

namespace {

int fail(llvm::Error e) {
  llvm::errs() << "graphc: error: " << llvm::toString(std::move(e)) << "\n";
  return 1;
}

/// The model of a subcommand, with graphc's --batch and --seed.
struct ModelArgs {
  ModelSourceFlags source;
  std::optional<int64_t> batchFlag;
  int64_t batch = 0; ///< --batch once checked; 0: the model's own
  uint64_t seed = 0;

  void add(CLI::App *cmd) {
    source.add(cmd);
    cmd->add_option("--batch", batchFlag, "the global batch (default: the model's own)");
    cmd->add_option("--seed", seed, "seed of initial values");
  }

  /// The flags' rules (tools/driver/RunChecks.h); `batch` set from --batch.
  llvm::Error check() {
    if (auto e = checkAtLeast("--batch", batchFlag, 1, "the batch"))
      return e;
    batch = batchFlag.value_or(0);
    return llvm::Error::success();
  }

  llvm::Expected<std::unique_ptr<Module>> load(bool bind = true) {
    if (auto e = check())
      return e;
    ModelSpec spec;
    if (auto e = source.applyTo(spec))
      return e;
    spec.seed = seed;
    spec.batch = batch;
    auto m = loadModel(spec);
    if (!m)
      return m.takeError();
    if (bind && batch > 0 && m->forward->batch() != batch)
      if (auto e = bindBatch(*m->forward, batch))
        return e;
    return std::move(m->forward);
  }
};

llvm::Error writeText(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    llvm::outs() << text;
    return llvm::Error::success();
  }
  return writeOutputFile(path, text);
}

struct InspectCommand {
  ModelArgs args;
  bool json = false;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("inspect", "parameters, MACs, activation bytes, per-op table");
    args.add(cmd);
    cmd->add_flag("--json", json, "machine-readable output");
  }

  int run() {
    auto m = args.load(false);
    if (!m)
      return fail(m.takeError());
    if (isPlaced(**m)) {
      if (auto e = printPlacedReport(*runnablePart(**m), llvm::outs(), json))
        return fail(std::move(e));
      return 0;
    }
    if (auto e = checkBatchFits(**m, args.batch))
      return fail(std::move(e));
    if (json)
      printSummaryJson(**m, args.batch, llvm::outs());
    else
      printSummary(**m, args.batch, llvm::outs());
    return 0;
  }
};

struct PrintCommand {
  ModelArgs args;
  bool weights = false;
  std::string out;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("print", "the model in graphc's text IR");
    args.add(cmd);
    cmd->add_flag("--weights", weights, "include variable data (lossless, large)");
    cmd->add_option("-o,--output", out, "write to a file instead of stdout");
  }

  int run() {
    auto m = args.load();
    if (!m)
      return fail(m.takeError());
    PrintOptions po;
    po.weights = weights;
    if (auto e = writeText(out, toText(**m, po)))
      return fail(std::move(e));
    return 0;
  }
};

struct ExportCommand {
  ModelArgs args;
  ExportFlags flags;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("export", "the forward graph and weights as ONNX (opset 17; "
                                       "inference form, --training-graph to train elsewhere)");
    args.add(cmd);
    flags.add(cmd);
  }

  int run() {
    auto m = args.load();
    if (!m)
      return fail(m.takeError());
    if (auto e = exportOnnxFile(**m, flags.output, args.seed, flags.form()))
      return fail(std::move(e));
    llvm::outs() << "wrote " << flags.output << "\n";
    return 0;
  }
};

struct CompileCommand {
  ModelArgs args;
  CompileRequest req;
  std::string out;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("compile", "run the training pipeline, write a module file");
    args.add(cmd);
    cmd->add_option("--pipeline", req.pipeline, "comma-separated passes (default: training)");
    addOptimizerFlag(cmd, req.options.optimizer);
    addDumpFlags(cmd, req.dump, DumpFlagSet::Passes);
    cmd->add_option("-o,--output", out, "module file to write")->required();
  }

  int run() {
    auto m = args.load(false);
    if (!m)
      return fail(m.takeError());
    req.options.batch = args.batch;
    req.options.seed = args.seed;
    auto c = compileTraining(**m, req);
    if (!c)
      return fail(c.takeError());
    if (auto e = writeModuleFile(out, **c))
      return fail(std::move(e));
    llvm::outs() << "wrote " << out << " (" << (*c)->main().numNodes() << " nodes)\n";
    return 0;
  }
};

struct PlaceCommand {
  ModelArgs args;
  CompileRequest req;
  PlacementRequest placement;
  PlacementFlags placementFlags;
  TaskFlags taskFlags;
  std::string out;
  bool explain = false;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("place", "compile for several devices: towers, split/concat, "
                                      "gradient aggregation, placement, transfers");
    args.add(cmd);
    placementFlags.add(cmd, placement);
    taskFlags.add(cmd, placement, TasksFor::Placement);
    cmd->add_option("--towers", placement.towers,
                    "GPU towers (default: one per GPU; 0: the single-device graph)");
    addOptimizerFlag(cmd, req.options.optimizer);
    cmd->add_flag(
        "--hard-placement", [this](int64_t) { placement.softPlacement = false; },
        "a node pinned where its op has no kernel is an error, not moved to the host");
    addDumpFlags(cmd, req.dump, DumpFlagSet::Placement);
    cmd->add_flag("--explain", explain, "for each node: requested device, assigned device, reason");
    cmd->add_option("-o,--output", out, "placed module file to write")->required();
  }

  int run() {
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t) {
      return std::chrono::duration<double>(Clock::now() - t).count();
    };
    if (auto e = checkPlacementFlags(placement))
      return fail(std::move(e));
    if (auto e = placementFlags.checkBucket())
      return fail(std::move(e));
    auto start = Clock::now();
    auto m = args.load(false);
    if (!m)
      return fail(m.takeError());
    double readSeconds = since(start);
    CompileOptions &po = req.options;
    po.batch = args.batch;
    po.seed = args.seed;
    if (auto e = placementFlags.apply(po, placement))
      return fail(std::move(e));
    if (auto e = placementFlags.findCalibrated(placement, /*emulated=*/false))
      return fail(std::move(e));
    if (auto e = taskFlags.readTasks(placement))
      return fail(std::move(e));
    placement.hostWithoutDevices = false; // a placed plan needs --gpus or --cluster
    bool defaultBatch = po.batch <= 0 && !(*m)->batch();
    auto compileStart = Clock::now();
    // Memory is a constraint: nothing is written for a plan that does not
    // fit, and the refusal says what would (passes/strategy/FitAdvisor.h).
    auto advisor = FitAdvisorOptions::fromEnvironment();
    if (!advisor)
      return fail(advisor.takeError());
    auto c = compileThatFits(**m, req, placement, *advisor);
    if (!c)
      return fail(c.takeError());
    double compileSeconds = since(compileStart);
    std::string split = describeSplit(**c);
    std::string params = describeParamsChoice(**c, explain);
    if (std::string mp = describeModelParallel(**c); !mp.empty())
      params = mp;
    if (std::string pipeline = describePipeline(**c); !pipeline.empty())
      params = pipeline;
    if (explain) {
      if (!params.empty())
        llvm::outs() << params << (params.back() == '\n' ? "" : "\n");
      if (!split.empty())
        llvm::outs() << "split: " << split << "\n";
      printPlacementExplanation(*runnablePart(**c), llvm::outs());
    }
    auto writeStart = Clock::now();
    if (auto e = writeModuleFile(out, **c))
      return fail(std::move(e));
    if (req.dump.timePasses)
      llvm::errs() << llvm::format("read the model %.3f s, compile and place %.3f s, write the "
                                   "module %.3f s\n",
                                   readSeconds, compileSeconds, since(writeStart));
    report(**c, split, params, defaultBatch);
    // The process ends here: freeing the two modules, node by node, would
    // take about as long as placing them (LLVM's tools bury theirs the same
    // way; the memory stays reachable, so leak checkers keep quiet).
    llvm::BuryPointer(std::move(*c));
    llvm::BuryPointer(std::move(*m));
    return 0;
  }

  /// What was written: the towers, workers and ps tasks, the batch and how
  /// it is split, where the parameters went.
  void report(Module &c, const std::string &split, const std::string &params,
              bool defaultBatch) const {
    const CompileOptions &po = req.options;
    int64_t towers = c.plan().towers.value_or(0), batch = c.batch().value_or(0);
    llvm::outs() << "wrote " << out << " (" << c.main().numNodes() << " nodes, ";
    Ints workerTowers = c.plan().workerTowers.value_or(Ints{});
    if (workerTowers.size() > 1 && llvm::is_splat(workerTowers))
      llvm::outs() << workerTowers.size() << " workers x " << workerTowers[0] << " towers";
    else if (workerTowers.size() > 1)
      llvm::outs() << workerTowers.size() << " workers with "
                   << llvm::join(llvm::map_range(workerTowers,
                                                 [](int64_t t) { return std::to_string(t); }),
                                 ", ")
                   << " towers";
    else if (towers)
      llvm::outs() << towers << (towers == 1 ? " tower" : " towers");
    else
      llvm::outs() << "the single-device graph";
    if (unsigned ps = placement.psTasks())
      llvm::outs() << ", " << ps << " ps task" << (ps == 1 ? "" : "s")
                   << (placement.psAsync ? " (asynchronous)" : "");
    llvm::outs() << ", global batch " << batch;
    if (po.accumulate > 1)
      llvm::outs() << " x " << po.accumulate << " micro-batches per update";
    if (defaultBatch)
      llvm::outs() << ": the model's batch is symbolic and no --batch was given, so "
                   << kDefaultBatch << " in all, as graphrun train takes"
                   << (placement.strategy == Strategy::Pipeline
                           ? " (up to a multiple of the micro-batches of every pipeline)"
                           : "");
    if (po.precision != Precision::FP32)
      llvm::outs() << "; " << modeName(po.precision) << " compute";
    if (std::optional<double> scale = c.plan().lossScale)
      llvm::outs() << llvm::format("; dynamic loss scale from %.9g", *scale);
    llvm::outs() << ")\n";
    if (!split.empty())
      llvm::outs() << "split: " << split << "\n";
    printCalibrated(placementFlags.calibrated(), llvm::outs());
    if (!params.empty() && !explain)
      llvm::outs() << params << "\n";
    if (std::string recompute = describeRecompute(c); !recompute.empty())
      llvm::outs() << recompute << " (graphc inspect lists them)\n";
    if (std::string sharded = describeShardedSlots(c); !sharded.empty())
      llvm::outs() << sharded << "\n";
    if (batch < towers)
      llvm::outs() << "note: a global batch of " << batch << " leaves " << towers - batch << " of "
                   << towers << " towers without samples (--remainder error refuses this)\n";
  }
};

struct ViewCommand {
  std::string in, out, metricsPath, tracePath;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand("view", "a placed module as an offline HTML page, SVG or DOT");
    cmd->add_option("MODULE", in, "a module or model file")->required();
    cmd->add_option("-o,--output", out, "FILE.html, FILE.svg or FILE.dot")->required();
    cmd->add_option("--metrics", metricsPath,
                    "graphrun train --metrics FILE.jsonl of a run of the plan: the loss curve "
                    "beside the graph (.html)");
    cmd->add_option("--trace", tracePath,
                    "graphrun train --trace FILE of a run of the plan: each device's busy time "
                    "beside the graph (.html)");
  }

  int run() {
    llvm::StringRef ext = llvm::StringRef(out).rsplit('.').second;
    if (ext != "html" && ext != "dot" && ext != "svg")
      return fail(makeError("graphc view writes .html, .svg or .dot, not '" + out + "'"));
    if (ext != "html" && (!metricsPath.empty() || !tracePath.empty()))
      return fail(makeError("--metrics and --trace are shown by the HTML view only: write "
                            "FILE.html, not '" +
                            out + "'"));
    ModelArgs viewArgs;
    viewArgs.source.path = in;
    auto loaded = viewArgs.load(false);
    if (!loaded)
      return fail(loaded.takeError());
    std::unique_ptr<Module> shown = runnablePart(**loaded);
    std::optional<RunMetrics> metrics;
    std::optional<RunTrace> trace;
    if (!metricsPath.empty()) {
      auto m = readMetrics(metricsPath);
      if (!m)
        return fail(m.takeError());
      metrics = std::move(*m);
    }
    if (!tracePath.empty()) {
      auto t = readTrace(tracePath);
      if (!t)
        return fail(t.takeError());
      trace = std::move(*t);
    }
    std::vector<std::string> notes;
    if (auto e = checkRunMatchesPlan(*shown, metrics ? &*metrics : nullptr,
                                     trace ? &*trace : nullptr, notes))
      return fail(std::move(e));
    std::string text;
    if (ext == "html") {
      llvm::raw_string_ostream os(text);
      writeHtmlView(*shown, os, metrics ? &*metrics : nullptr, trace ? &*trace : nullptr);
    } else if (ext == "dot") {
      text = toDot(*shown);
    } else {
      auto svg = svgOf(*shown);
      if (!svg)
        return fail(svg.takeError());
      text = std::move(*svg);
    }
    if (auto e = writeOutputFile(out, text))
      return fail(std::move(e));
    for (const std::string &note : notes)
      llvm::outs() << "note: " << note << "\n";
    llvm::outs() << "wrote " << out << "\n";
    return 0;
  }
};

struct SimulateCommand {
  ModelArgs args;
  bool json = false;
  std::string gpus, params = "mirrored", gpuModel = "auto";
  ScalingRequest scaling;
  double networkGbps = scaling.sim.networkBandwidth * 8 / 1e9;
  CLI::App *cmd = nullptr;

  void add(CLI::App &app) {
    cmd = app.add_subcommand(
        "simulate", "one step of a placed module, event by event: per-device busy and idle time, "
                    "the predicted step and its critical path; with --gpus LIST, a scaling table");
    args.add(cmd);
    cmd->add_flag("--json", json, "machine-readable output (a placed module)");
    cmd->add_option("--gpus", gpus,
                    "GPU counts for a predicted scaling table of the model, e.g. 1,2,4,8,64,1024");
    cmd->add_option("--workers-of", scaling.workersOf, "GPUs per worker (machine)")
        ->capture_default_str();
    cmd->add_option("--batch-per-gpu", scaling.batchPerGpu, "images per GPU (weak scaling)")
        ->capture_default_str();
    cmd->add_option("--network-gbps", networkGbps, "network bandwidth per worker, Gb/s")
        ->capture_default_str();
    cmd->add_option("--params", params, "cpu | gpu:K | spread | mirrored")->capture_default_str();
    cmd->add_option("--cluster", scaling.clusterFile,
                    "with --gpus: one worker's machine (its GPUs are --workers-of)");
    addGpuModelFlag(cmd, gpuModel);
  }

  int run() {
    if (!gpus.empty())
      return runScalingTable();
    if (!scaling.clusterFile.empty())
      return fail(makeError("--cluster goes with --gpus LIST (a scaling table's worker); a "
                            "placed plan simulates on the cluster it was placed for"));
    auto loaded = args.load(false);
    if (!loaded)
      return fail(loaded.takeError());
    if (!isPlaced(**loaded))
      return fail(makeError("the model is not a placed module: graphc simulate takes what graphc "
                            "place writes, or --gpus LIST for a scaling table"));
    const std::optional<Cluster> &cluster = (*loaded)->plan().cluster;
    if (!cluster)
      return fail(makeError("the placed module records no cluster"));
    auto sim = simulateStep(**loaded, *cluster);
    if (!sim)
      return fail(sim.takeError());
    if (json) {
      llvm::json::Value report = simulationJson(*sim);
      if (auto recompute = recomputeReportJson(**loaded, sim->stepSeconds))
        report.getAsObject()->try_emplace("recompute", std::move(*recompute));
      if (auto bubble = pipelineBubbleJson(**loaded, *sim))
        report.getAsObject()->try_emplace("pipeline", std::move(*bubble));
      llvm::outs() << report << "\n";
      return 0;
    }
    llvm::outs() << "graphc simulate: " << args.source.path << ", one step at batch "
                 << (*loaded)->batch().value_or(1) << "\n";
    printSimulation(*sim, llvm::outs());
    printPipelineBubble(**loaded, *sim, llvm::outs());
    printRecomputeReport(**loaded, llvm::outs(), sim->stepSeconds);
    return 0;
  }

  /// --gpus LIST: the model's predicted data-parallel scaling.
  int runScalingTable() {
    if (auto e = checkScalingFlags())
      return fail(std::move(e));
    auto m = args.load(false);
    if (!m)
      return fail(m.takeError());
    std::unique_ptr<Module> forward = std::move(*m);
    if (isCompiledForTraining(*forward)) {
      auto f = forwardOf(*forward);
      if (!f)
        return fail(f.takeError());
      forward = std::move(*f);
    }
    CompileRequest req;
    TowerModeFlags modes;
    modes.params = params;
    if (auto e = parseTowerModes(modes, req.options))
      return fail(std::move(e));
    auto rows = scalingTable(*forward, req, scaling);
    if (!rows)
      return fail(rows.takeError());
    llvm::outs() << "graphc simulate: " << forward->name() << " data-parallel, --params " << params
                 << (scaling.clusterFile.empty() && scaling.calibratedFile.empty()
                         ? ", default cluster figures (docs/placement.md)"
                         : "")
                 << "\n";
    printScalingTable(*rows, scaling, llvm::outs());
    return 0;
  }

  /// The scaling table's flags into `scaling`, its worker from --cluster.
  llvm::Error checkScalingFlags() {
    for (llvm::StringRef item : llvm::split(gpus, ',')) {
      unsigned n = 0;
      if (item.trim().getAsInteger(10, n) || n == 0)
        return makeError("--gpus '" + gpus + "': give GPU counts such as 1,2,4,8");
      scaling.gpus.push_back(n);
    }
    if (!(networkGbps > 0) || !std::isfinite(networkGbps))
      return makeError("--network-gbps " + numberText(networkGbps) +
                       ": must be a positive number of Gb/s");
    scaling.sim.networkBandwidth = networkGbps * 1e9 / 8;
    if (auto e = checkAtLeast("--batch-per-gpu", scaling.batchPerGpu, 1, "the images per GPU"))
      return e;
    if (auto e = checkAtLeast("--workers-of", scaling.workersOf, 1, "the GPUs per worker"))
      return e;
    if (scaling.clusterFile.empty()) {
      auto found = findCalibratedGpu(gpuModel, /*emulated=*/false);
      if (!found)
        return found.takeError();
      if (!found->note.empty())
        llvm::errs() << "note: " << found->note << "\n";
      scaling.calibratedFile = found->file;
      return llvm::Error::success();
    }
    if (cmd->count("--gpu-model") > 0)
      return makeError("--gpu-model goes with --gpus LIST without --cluster: a cluster file (" +
                       scaling.clusterFile + ") has its own figures");
    auto worker = loadClusterFile(scaling.clusterFile);
    if (!worker)
      return worker.takeError();
    if (worker->numGpus() == 0)
      return makeError("--cluster " + scaling.clusterFile + ": a worker without GPUs");
    if (cmd->count("--workers-of") > 0 && scaling.workersOf != worker->numGpus())
      return makeError("--workers-of " + llvm::Twine(scaling.workersOf) + " but --cluster " +
                       scaling.clusterFile + " has " + llvm::Twine(worker->numGpus()) +
                       " GPUs: a worker is the cluster's machine");
    scaling.workersOf = worker->numGpus();
    return llvm::Error::success();
  }
};

int listPasses() {
  for (auto &[name, summary] : PassRegistry::global().list())
    llvm::outs() << llvm::format("  %-22s %s\n", name.c_str(), summary.c_str());
  llvm::outs() << "default training pipeline: " << kDefaultTrainingPipeline << "\n"
               << "placement pipeline (after training): " << kPlacementPipeline << "\n"
               << "inference pipeline: " << kDefaultInferencePipeline << "\n";
  return 0;
}

int run(int argc, char **argv) {
  CLI::App app{"graphc: compile a single-device model for training on many devices"};
  app.require_subcommand(1);
  // Given before or after the subcommand (fallthrough), for every subcommand.
  app.fallthrough();
  MemoryLimitFlag memoryLimit;
  memoryLimit.add(app);
  InspectCommand inspect;
  inspect.add(app);
  PrintCommand print;
  print.add(app);
  ExportCommand exp;
  exp.add(app);
  CompileCommand compile;
  compile.add(app);
  PlaceCommand place;
  place.add(app);
  ViewCommand view;
  view.add(app);
  SimulateCommand simulate;
  simulate.add(app);
  CLI::App *passes = app.add_subcommand("passes", "list the registered passes");

  if (auto status = parseCommandLine(app, argc, argv, "graphc"))
    return *status;
  if (auto e = memoryLimit.apply())
    return fail(std::move(e));
  if (*inspect.cmd)
    return inspect.run();
  if (*print.cmd)
    return print.run();
  if (*exp.cmd)
    return exp.run();
  if (*compile.cmd)
    return compile.run();
  if (*place.cmd)
    return place.run();
  if (*view.cmd)
    return view.run();
  if (*simulate.cmd)
    return simulate.run();
  if (*passes)
    return listPasses();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  ignoreFileSizeSignal();
  return finishOutput(run(argc, argv), "graphc");
}
