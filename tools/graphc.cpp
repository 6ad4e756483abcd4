//===- graphc.cpp - The compiler's command line ----------------------------===//
//
//   graphc inspect [MODEL | --model NAME] [--batch N] [--json]
//   graphc print   [MODEL | --model NAME] [--batch N] [--weights] [-o FILE]
//   graphc export  [MODEL | --model NAME] -o FILE.onnx
//   graphc compile [MODEL | --model NAME] --batch N [--pipeline a,b] [--dump-dir D] -o FILE
//   graphc place   [MODEL | --model NAME] --gpus N [--workers W | --tasks FILE] [--ps P]
//   [--ps-async]
//                  --batch B [--params P] -o FILE
//   [--explain] graphc view    PLACED -o FILE.html | .svg | .dot graphc passes
//   graphc simulate PLACED [--json]
//   graphc simulate [MODEL | --model NAME] --gpus 1,2,...,1024 [--workers-of 8]
//
// Every subcommand is a few calls into the libraries; errors print one line
// and exit non-zero.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxExporter.h"
#include "ir/Archive.h"
#include "ir/Diagnostics.h"
#include "ir/MemoryLimit.h"
#include "ir/ModelSummary.h"
#include "ir/OutputFile.h"
#include "ir/Printer.h"
#include "ir/ShapeInference.h"
#include "passes/AccumulateGradients.h"
#include "placement/DotView.h"
#include "placement/HtmlView.h"
#include "placement/Placer.h"
#include "tools/driver/CommandLine.h"
#include "tools/driver/Compile.h"
#include "tools/driver/CompileModelParallel.h"
#include "tools/driver/Inspect.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/ParamsAuto.h"
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

struct ModelArgs {
  std::string path, name;
  std::optional<int64_t> batchFlag;
  int64_t batch = 0; ///< --batch once checked; 0: the model's own
  ModelFlags flags;
  uint64_t seed = 0;

  void add(CLI::App *cmd) {
    cmd->add_option("MODEL", path, "ONNX model, .gir text, graphc module file or checkpoint");
    cmd->add_option("--model", name,
                    "a built-in model (inception_v3, resnet18, resnet50, "
                    "small_cnn, small_cnn_nobn, mlp)");
    cmd->add_option("--batch", batchFlag, "bind the batch dimension");
    cmd->add_option("--num-classes", flags.numClasses, "classes of a built-in model");
    cmd->add_option("--image-size", flags.imageSize, "input side of a built-in model");
    cmd->add_flag("--aux-logits", flags.auxLogits, "inception_v3's auxiliary head");
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
    spec.path = path;
    spec.name = name;
    if (auto e = applyModelFlags(flags, spec))
      return e;
    spec.seed = seed;
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

/// graphc simulate --gpus LIST: the model's predicted data-parallel scaling.
int runScalingTable(ModelArgs &args, const std::string &gpus, const std::string &params,
                    double networkGbps, bool workersOfGiven, ScalingRequest scaling) {
  for (llvm::StringRef item : llvm::split(gpus, ',')) {
    unsigned n = 0;
    if (item.trim().getAsInteger(10, n) || n == 0)
      return fail(makeError("--gpus '" + gpus + "': give GPU counts such as 1,2,4,8"));
    scaling.gpus.push_back(n);
  }
  if (!(networkGbps > 0) || !std::isfinite(networkGbps))
    return fail(makeError("--network-gbps " + numberText(networkGbps) +
                          ": must be a positive number of Gb/s"));
  scaling.sim.networkBandwidth = networkGbps * 1e9 / 8;
  if (auto e = checkAtLeast("--batch-per-gpu", scaling.batchPerGpu, 1, "the images per GPU"))
    return fail(std::move(e));
  if (auto e = checkAtLeast("--workers-of", scaling.workersOf, 1, "the GPUs per worker"))
    return fail(std::move(e));
  if (!scaling.clusterFile.empty()) {
    auto worker = loadClusterFile(scaling.clusterFile);
    if (!worker)
      return fail(worker.takeError());
    if (worker->numGpus() == 0)
      return fail(makeError("--cluster " + scaling.clusterFile + ": a worker without GPUs"));
    if (workersOfGiven && scaling.workersOf != worker->numGpus())
      return fail(makeError("--workers-of " + llvm::Twine(scaling.workersOf) + " but --cluster " +
                            scaling.clusterFile + " has " + llvm::Twine(worker->numGpus()) +
                            " GPUs: a worker is the cluster's machine"));
    scaling.workersOf = worker->numGpus();
  }
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
               << ", default cluster figures (docs/placement.md)\n";
  printScalingTable(*rows, scaling, llvm::outs());
  return 0;
}

int run(int argc, char **argv) {
  CLI::App app{"graphc: compile a single-device model for training on many devices"};
  app.require_subcommand(1);
  // Given before or after the subcommand (fallthrough), for every subcommand.
  app.fallthrough();
  std::optional<std::string> memoryLimit;
  app.add_option("--memory-limit", memoryLimit,
                 "refuse tensors and host allocations beyond SIZE (e.g. 8G) before allocating");

  ModelArgs inspectArgs;
  bool json = false;
  auto *inspect = app.add_subcommand("inspect", "parameters, MACs, activation bytes, per-op table");
  inspectArgs.add(inspect);
  inspect->add_flag("--json", json, "machine-readable output");

  ModelArgs printArgs;
  bool weights = false;
  std::string printOut;
  auto *print = app.add_subcommand("print", "the model in graphc's text IR");
  printArgs.add(print);
  print->add_flag("--weights", weights, "include variable data (lossless, large)");
  print->add_option("-o,--output", printOut, "write to a file instead of stdout");

  ModelArgs exportArgs;
  std::string exportOut;
  auto *exp = app.add_subcommand("export", "the forward graph and weights as ONNX (opset 17)");
  exportArgs.add(exp);
  exp->add_option("-o,--output", exportOut, "ONNX file to write")->required();

  ModelArgs compileArgs;
  CompileRequest req;
  std::string compileOut;
  auto *compile = app.add_subcommand("compile", "run the training pipeline, write a module file");
  compileArgs.add(compile);
  compile->add_option("--pipeline", req.pipeline, "comma-separated passes (default: training)");
  compile->add_option("--optimizer", req.options.optimizer, "sgd | momentum | rmsprop | adam");
  compile->add_option("--dump-dir", req.dump.dumpDir, "write NNNN.after_<pass>.gir per pass");
  compile->add_flag("--print-ir-after-all", req.dump.printAfterAll, "print IR after every pass");
  compile->add_option("--print-ir-after", req.dump.printAfter, "print IR after these passes");
  compile->add_flag("--time-passes", req.dump.timePasses, "wall time of every pass");
  compile->add_option("-o,--output", compileOut, "module file to write")->required();

  ModelArgs placeArgs;
  CompileRequest placeReq;
  PlacementRequest placement;
  std::string placeOut;
  bool explain = false;
  double bucketMb = 25;
  auto *place = app.add_subcommand("place", "compile for several devices: towers, split/concat, "
                                            "gradient aggregation, placement, transfers");
  placeArgs.add(place);
  CompileOptions &po = placeReq.options;
  place->add_option("--gpus", placement.gpus, "GPUs of the default cluster (one tower each)");
  place->add_option("--cluster", placement.clusterFile, "a cluster description (JSON)");
  place
      ->add_option("--workers", placement.workers,
                   "worker processes (mpirun -np W), each with the GPUs of --gpus")
      ->capture_default_str();
  std::string tasksFile;
  place->add_option("--tasks", tasksFile,
                    "the run's tasks by role (chief, worker, ps) with each one's host and GPUs "
                    "(a cluster file or a TF_CONFIG; tasks without GPUs get --gpus)");
  place
      ->add_option("--ps", placement.ps,
                   "parameter-server tasks holding the variables, sharded by bytes (ranks W.."
                   "W+P-1 of mpirun -np W+P)")
      ->capture_default_str();
  place->add_flag("--ps-async", placement.psAsync,
                  "ps tasks apply each worker's update as it arrives");
  place->add_option("--towers", placement.towers,
                    "GPU towers (default: one per GPU; 0: the single-device graph)");
  TowerModeFlags modes;
  place
      ->add_option("--params", modes.params,
                   "cpu | gpu:K | spread | mirrored | auto (by predicted step under memory)")
      ->capture_default_str();
  place->add_option("--bn", modes.bn, "local | sync | frozen")->capture_default_str();
  place
      ->add_option(
          "--precision", modes.precision,
          "fp32 | bf16 (convolutions, batch norms, activations in bf16 with f32 master "
          "weights; CPU devices with bf16 instructions) | fp16 (the same in fp16 with dynamic "
          "loss scaling; GPUs, or --emulate)")
      ->capture_default_str();
  place->add_option(
      "--loss-scale", modes.lossScale,
      "dynamic loss scaling from this initial scale, or off (fp16: 65536, others: off)");
  place
      ->add_option("--loss-scale-interval", modes.lossScaleInterval,
                   "finite steps before the loss scale doubles")
      ->capture_default_str();
  place->add_option("--remainder", modes.remainder, "error | drop | uneven")->capture_default_str();
  place->add_option("--split", modes.split, "per-device batch weights, e.g. 4,4,2");
  std::string strategy = "data-parallel";
  place
      ->add_option("--strategy", strategy,
                   "data-parallel (a tower per device) | model-parallel (one replica spread over "
                   "the devices by m-ETF under their memory)")
      ->capture_default_str();
  place->add_option("--bucket-mb", bucketMb, "all-reduce bucket cap (mirrored)")
      ->capture_default_str();
  std::string accumulate = "1";
  place
      ->add_option("--accumulate", accumulate,
                   "K micro-batches of --batch per update: a graph 'micro' that only "
                   "accumulates, aggregation once per update")
      ->capture_default_str();
  place->add_option("--optimizer", po.optimizer, "sgd | momentum | rmsprop | adam")
      ->capture_default_str();
  place->add_flag(
      "--hard-placement", [&](int64_t) { placement.softPlacement = false; },
      "a node pinned where its op has no kernel is an error, not moved to the host");
  place->add_option("--dump-dir", placeReq.dump.dumpDir,
                    "NNNN.after_<pass>.gir (and .dot) per pass");
  place->add_flag("--dump-dot", placeReq.dump.dumpDot, "also write a .dot per pass");
  place->add_flag("--print-ir-after-all", placeReq.dump.printAfterAll, "print IR after every pass");
  place->add_option("--print-ir-after", placeReq.dump.printAfter, "print IR after these passes");
  place->add_flag("--time-passes", placeReq.dump.timePasses,
                  "wall time of every pass, and of reading the model and writing the module");
  place->add_flag("--explain", explain, "for each node: requested device, assigned device, reason");
  place->add_option("-o,--output", placeOut, "placed module file to write")->required();

  std::string viewIn, viewOut;
  auto *view = app.add_subcommand("view", "a placed module as an offline HTML page, SVG or DOT");
  view->add_option("MODULE", viewIn, "a module or model file")->required();
  view->add_option("-o,--output", viewOut, "FILE.html, FILE.svg or FILE.dot")->required();

  ModelArgs simArgs;
  bool simJson = false;
  std::string simGpus, simParams = "mirrored";
  ScalingRequest scaling;
  double networkGbps = scaling.sim.networkBandwidth * 8 / 1e9;
  auto *simulate = app.add_subcommand(
      "simulate", "one step of a placed module, event by event: per-device busy and idle time, "
                  "the predicted step and its critical path; with --gpus LIST, a scaling table");
  simArgs.add(simulate);
  simulate->add_flag("--json", simJson, "machine-readable output (a placed module)");
  simulate->add_option(
      "--gpus", simGpus,
      "GPU counts for a predicted scaling table of the model, e.g. 1,2,4,8,64,1024");
  simulate->add_option("--workers-of", scaling.workersOf, "GPUs per worker (machine)")
      ->capture_default_str();
  simulate->add_option("--batch-per-gpu", scaling.batchPerGpu, "images per GPU (weak scaling)")
      ->capture_default_str();
  simulate->add_option("--network-gbps", networkGbps, "network bandwidth per worker, Gb/s")
      ->capture_default_str();
  simulate->add_option("--params", simParams, "cpu | gpu:K | spread | mirrored")
      ->capture_default_str();
  simulate->add_option("--cluster", scaling.clusterFile,
                       "with --gpus: one worker's machine (its GPUs are --workers-of)");

  auto *passes = app.add_subcommand("passes", "list the registered passes");

  if (auto status = parseCommandLine(app, argc, argv, "graphc"))
    return *status;
  if (memoryLimit)
    if (auto e = applyMemoryLimitFlag(*memoryLimit))
      return fail(std::move(e));

  if (*inspect) {
    auto m = inspectArgs.load(false);
    if (!m)
      return fail(m.takeError());
    if (isPlaced(**m)) {
      if (auto e = printPlacedReport(*runnablePart(**m), llvm::outs(), json))
        return fail(std::move(e));
      return 0;
    }
    if (auto e = checkBatchFits(**m, inspectArgs.batch))
      return fail(std::move(e));
    if (json)
      printSummaryJson(**m, inspectArgs.batch, llvm::outs());
    else
      printSummary(**m, inspectArgs.batch, llvm::outs());
    return 0;
  }
  if (*print) {
    auto m = printArgs.load();
    if (!m)
      return fail(m.takeError());
    PrintOptions po;
    po.weights = weights;
    if (auto e = writeText(printOut, toText(**m, po)))
      return fail(std::move(e));
    return 0;
  }
  if (*exp) {
    auto m = exportArgs.load();
    if (!m)
      return fail(m.takeError());
    if (auto e = exportOnnxFile(**m, exportOut, exportArgs.seed))
      return fail(std::move(e));
    llvm::outs() << "wrote " << exportOut << "\n";
    return 0;
  }
  if (*compile) {
    auto m = compileArgs.load(false);
    if (!m)
      return fail(m.takeError());
    req.options.batch = compileArgs.batch;
    req.options.seed = compileArgs.seed;
    auto c = compileTraining(**m, req);
    if (!c)
      return fail(c.takeError());
    if (auto e = writeModuleFile(compileOut, **c))
      return fail(std::move(e));
    llvm::outs() << "wrote " << compileOut << " (" << (*c)->main().numNodes() << " nodes)\n";
    return 0;
  }
  if (*place) {
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t) {
      return std::chrono::duration<double>(Clock::now() - t).count();
    };
    if (auto e = checkPlacementFlags(placement))
      return fail(std::move(e));
    if (auto e = checkBucketMb(bucketMb))
      return fail(std::move(e));
    auto start = Clock::now();
    auto m = placeArgs.load(false);
    if (!m)
      return fail(m.takeError());
    double readSeconds = since(start);
    po.batch = placeArgs.batch;
    po.seed = placeArgs.seed;
    po.bucketBytes = (int64_t)(bucketMb * 1e6);
    placement.searchBuckets = place->count("--bucket-mb") == 0;
    if (auto e = parseTowerModes(modes, po))
      return fail(std::move(e));
    auto parsedStrategy = parseStrategy(strategy);
    if (!parsedStrategy)
      return fail(withContext(parsedStrategy.takeError(), "--strategy"));
    placement.strategy = *parsedStrategy;
    auto steps = parseAccumulateSteps(accumulate);
    if (!steps)
      return fail(steps.takeError());
    po.accumulate = *steps;
    if (!tasksFile.empty()) {
      if (placement.workers > 1)
        return fail(makeError("--tasks and --workers both give the workers; use one"));
      auto tasks = loadTasksFile(tasksFile, (unsigned)std::max(0, placement.gpus));
      if (!tasks)
        return fail(tasks.takeError());
      if (!tasks->hasGpus())
        return fail(makeError(tasksFile + ": no chief or worker task has GPUs to place towers on "
                                          "(give them \"gpus\", or --gpus)"));
      placement.tasks = std::move(*tasks);
      placement.tasksSource = "--tasks " + tasksFile;
    }
    bool defaultBatch = po.batch <= 0 && !(*m)->batch();
    auto compileStart = Clock::now();
    auto c = compilePlaced(**m, placeReq, placement);
    if (!c)
      return fail(c.takeError());
    double compileSeconds = since(compileStart);
    // Memory is a constraint: nothing is written for a plan that does not fit.
    if (auto e = checkPlanFitsCluster(**c))
      return fail(std::move(e));
    std::string split = describeSplit(**c);
    std::string params = describeParamsChoice(**c, explain);
    if (std::string mp = describeModelParallel(**c); !mp.empty())
      params = mp;
    if (explain) {
      if (!params.empty())
        llvm::outs() << params << (params.back() == '\n' ? "" : "\n");
      if (!split.empty())
        llvm::outs() << "split: " << split << "\n";
      printPlacementExplanation(*runnablePart(**c), llvm::outs());
    }
    auto writeStart = Clock::now();
    if (auto e = writeModuleFile(placeOut, **c))
      return fail(std::move(e));
    if (placeReq.dump.timePasses)
      llvm::errs() << llvm::format("read the model %.3f s, compile and place %.3f s, write the "
                                   "module %.3f s\n",
                                   readSeconds, compileSeconds, since(writeStart));
    int64_t towers = (*c)->plan().towers.value_or(0), batch = (*c)->batch().value_or(0);
    llvm::outs() << "wrote " << placeOut << " (" << (*c)->main().numNodes() << " nodes, ";
    Ints workerTowers = (*c)->plan().workerTowers.value_or(Ints{});
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
                   << kDefaultBatchPerTower << " per tower";
    if (po.precision != Precision::FP32)
      llvm::outs() << "; " << modeName(po.precision) << " compute";
    if (std::optional<double> scale = (*c)->plan().lossScale)
      llvm::outs() << llvm::format("; dynamic loss scale from %.9g", *scale);
    llvm::outs() << ")\n";
    if (!split.empty())
      llvm::outs() << "split: " << split << "\n";
    if (!params.empty() && !explain)
      llvm::outs() << params << "\n";
    if (batch < towers)
      llvm::outs() << "note: a global batch of " << batch << " leaves " << towers - batch << " of "
                   << towers << " towers without samples (--remainder error refuses this)\n";
    // The process ends here: freeing the two modules, node by node, would
    // take about as long as placing them (LLVM's tools bury theirs the same
    // way; the memory stays reachable, so leak checkers keep quiet).
    llvm::BuryPointer(std::move(*c));
    llvm::BuryPointer(std::move(*m));
    return 0;
  }
  if (*view) {
    ModelArgs viewArgs;
    viewArgs.path = viewIn;
    auto loaded = viewArgs.load(false);
    if (!loaded)
      return fail(loaded.takeError());
    std::unique_ptr<Module> shown = runnablePart(**loaded);
    const std::unique_ptr<Module> *m = &shown;
    llvm::StringRef ext = llvm::StringRef(viewOut).rsplit('.').second;
    std::string text;
    if (ext == "html") {
      llvm::raw_string_ostream os(text);
      writeHtmlView(**m, os);
    } else if (ext == "dot") {
      text = toDot(**m);
    } else if (ext == "svg") {
      auto svg = renderSvg(toDot(**m));
      if (!svg)
        return fail(svg.takeError());
      text = std::move(*svg);
    } else {
      return fail(
          llvm::createStringError(llvm::inconvertibleErrorCode(),
                                  "graphc view writes .html, .svg or .dot, not '" + viewOut + "'"));
    }
    if (auto e = writeOutputFile(viewOut, text))
      return fail(std::move(e));
    llvm::outs() << "wrote " << viewOut << "\n";
    return 0;
  }
  if (*simulate) {
    if (!simGpus.empty())
      return runScalingTable(simArgs, simGpus, simParams, networkGbps,
                             simulate->count("--workers-of") > 0, scaling);
    if (!scaling.clusterFile.empty())
      return fail(makeError("--cluster goes with --gpus LIST (a scaling table's worker); a "
                            "placed plan simulates on the cluster it was placed for"));
    auto loaded = simArgs.load(false);
    if (!loaded)
      return fail(loaded.takeError());
    if (!isPlaced(**loaded))
      return fail(makeError("the model is not a placed module: graphc simulate takes what graphc "
                            "place writes, or --gpus LIST for a scaling table"));
    const std::optional<Cluster> &cluster = (*loaded)->plan().cluster;
    if (!cluster)
      return fail(makeError("the placed module records no cluster"));
    std::unique_ptr<Module> runnable = runnablePart(**loaded); // the result points into it
    auto sim = simulateStep(*runnable, *cluster);
    if (!sim)
      return fail(sim.takeError());
    if (simJson) {
      llvm::outs() << simulationJson(*sim) << "\n";
      return 0;
    }
    llvm::outs() << "graphc simulate: " << simArgs.path << ", one step at batch "
                 << (*loaded)->batch().value_or(1) << "\n";
    printSimulation(*sim, llvm::outs());
    return 0;
  }
  if (*passes) {
    for (auto &[name, summary] : PassRegistry::global().list())
      llvm::outs() << llvm::format("  %-22s %s\n", name.c_str(), summary.c_str());
    llvm::outs() << "default training pipeline: " << kDefaultTrainingPipeline << "\n";
    return 0;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  ignoreFileSizeSignal();
  return finishOutput(run(argc, argv), "graphc");
}
