//===- FlagRulesTest.cpp - One rule per flag, checked before use (issue 28) -===//
//
// The rules of tools/driver/RunChecks.h and the whole-number check of
// tools/driver/CommandLine.h, called as the tools call them. The command
// lines themselves are tested end to end in cli_bad_input_test.py.
//
//===----------------------------------------------------------------------===//
#include "tools/driver/CommandLine.h"
#include "tools/driver/ModelSource.h"
#include "tools/driver/RunChecks.h"
#include "tools/driver/TrainOptions.h"

#include "ir/MemoryLimit.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

std::string message(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "ok";
}

/// What parseCommandLine makes of `args` for an app with one signed and one
/// unsigned option: "ok", or the status it would exit with.
std::string parse(std::vector<std::string> args, int64_t *steps = nullptr) {
  CLI::App app{"test"};
  int64_t s = 0;
  uint64_t seed = 0;
  app.add_option("--steps", s);
  app.add_option("--seed", seed);
  std::vector<char *> argv{const_cast<char *>("test")};
  for (std::string &a : args)
    argv.push_back(a.data());
  auto status = parseCommandLine(app, (int)argv.size(), argv.data(), "test");
  if (steps)
    *steps = s;
  return status ? "exit " + std::to_string(*status) : "ok";
}

} // namespace

TEST(FlagRules, WholeNumbersAreDecimalAndInRange) {
  int64_t steps = 0;
  EXPECT_EQ(parse({"--steps", "12", "--seed", "18446744073709551615"}, &steps), "ok");
  EXPECT_EQ(steps, 12);
  // CLI11 alone saturated, wrapped or read another base.
  EXPECT_EQ(parse({"--seed", "18446744073709551616"}), "exit 1");
  EXPECT_EQ(parse({"--seed", "-1"}), "exit 1");
  EXPECT_EQ(parse({"--steps", "99999999999999999999"}), "exit 1");
  EXPECT_EQ(parse({"--steps", "0x10"}), "exit 1");
  EXPECT_EQ(parse({"--steps", "010"}, &steps), "ok");
  EXPECT_EQ(steps, 10);
  EXPECT_EQ(parse({"--steps", "-3"}, &steps), "ok"); // the flag's own rule refuses it later
  EXPECT_EQ(parse({"--help"}), "exit 0");
}

TEST(FlagRules, ModelFlagsAreCountsForBuiltInModels) {
  ModelSpec spec;
  spec.name = "mlp";
  ModelFlags flags;
  flags.numClasses = 0;
  EXPECT_EQ(message(applyModelFlags(flags, spec)),
            "--num-classes 0: the number of classes must be at least 1");
  flags = {};
  flags.imageSize = -4;
  EXPECT_EQ(message(applyModelFlags(flags, spec)),
            "--image-size -4: the image side must be at least 1");
  for (double bad : {-0.1, 1.0, std::nan("")}) {
    flags = {};
    flags.dropout = bad;
    EXPECT_NE(message(applyModelFlags(flags, spec)).find("the dropout ratio must be in [0, 1)"),
              std::string::npos);
  }
  flags = {};
  flags.numClasses = 5;
  flags.dropout = 0;
  EXPECT_EQ(message(applyModelFlags(flags, spec)), "ok");
  EXPECT_EQ(spec.options.numClasses, 5);
  EXPECT_EQ(spec.options.dropout, 0.0);
  ModelSpec file;
  file.path = "m.onnx";
  EXPECT_EQ(message(applyModelFlags(flags, file)),
            "--num-classes applies to a built-in model (--model NAME), not to 'm.onnx', which "
            "has its own");
}

TEST(FlagRules, PlacementCounts) {
  PlacementRequest place;
  EXPECT_EQ(message(checkPlacementFlags(place)), "ok");
  place.gpus = -1;
  EXPECT_EQ(message(checkPlacementFlags(place)),
            "--gpus -1: the number of GPUs must be 0 or more (0: the host alone)");
  place = {};
  place.workers = 0;
  EXPECT_EQ(message(checkPlacementFlags(place)),
            "--workers 0: the number of worker processes must be at least 1");
  place = {};
  place.ps = -2;
  EXPECT_EQ(message(checkPlacementFlags(place)),
            "--ps -2: the number of parameter-server tasks must be at least 0");
  place = {};
  place.towers = -1;
  EXPECT_EQ(message(checkPlacementFlags(place)),
            "--towers -1: the number of towers must be at least 0");
  EXPECT_EQ(message(checkBucketMb(0)), "--bucket-mb 0: must be a positive number");
  EXPECT_EQ(message(checkBucketMb(INFINITY)), "--bucket-mb inf: must be a positive number");
}

TEST(FlagRules, SyntheticDataAgainstTheModel) {
  SyntheticData data;
  const int64_t mnist = 784 * 4;
  EXPECT_EQ(message(checkSyntheticData(data, 10, mnist)), "ok");
  data.classes = 11;
  EXPECT_EQ(message(checkSyntheticData(data, 10, mnist)),
            "--synthetic-classes 11: the model has 10 classes, so from 1 to 10 (0: all of them)");
  data.classes = -1;
  EXPECT_NE(message(checkSyntheticData(data, 10, mnist)), "ok");
  data.classes = 0;
  EXPECT_EQ(message(checkSyntheticData(data, 10, mnist)), "ok");
  data.samples = 0;
  EXPECT_EQ(message(checkSyntheticData(data, 10, mnist)),
            "--synthetic-samples 0: the number of samples must be at least 1");
  data.samples = 1000000000000;
  EXPECT_EQ(message(checkSyntheticData(data, 10, mnist)),
            "--synthetic-samples 1000000000000: a set of 2.79 PiB (3.06 KiB a sample) is more "
            "than the 1 TiB a tensor may take");
  data.samples = INT64_MAX;
  EXPECT_NE(message(checkSyntheticData(data, 10, mnist)), "ok"); // no overflow
  data.samples = 100000;
  EXPECT_EQ(message(checkSyntheticData(data, 10, mnist)), "ok");
  setMemoryLimit(64 << 20);
  EXPECT_EQ(message(checkSyntheticData(data, 10, mnist)),
            "--synthetic-samples 100000: a set of 299.07 MiB (3.06 KiB a sample) is more than "
            "the --memory-limit of 64.00 MiB");
  setMemoryLimit(0);
}
