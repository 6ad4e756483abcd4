//===- ClusterTest.cpp - Default clusters, cluster files and their errors --===//

#include "ir/Cluster.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

std::string parseError(llvm::StringRef json) {
  auto c = parseClusterJson(json);
  if (c)
    return "(parsed)";
  return llvm::toString(c.takeError());
}

const char *kGood = R"({
  "devices": [
    {"name": "gpu:0", "kind": "gpu", "memory_bytes": 42949672960, "relative_speed": 1.0},
    {"name": "gpu:1", "kind": "gpu", "memory_bytes": 25769803776, "relative_speed": 0.5},
    {"name": "cpu:0", "kind": "cpu", "memory_bytes": 274877906944, "relative_speed": 1}
  ],
  "links": [
    {"endpoints": ["cpu:0", "gpu:0"], "bandwidth": 32e9},
    {"endpoints": ["gpu:1", "cpu:0"], "bandwidth": 16e9}
  ],
  "peak_flops": {"gpu": 20e12}
})";

} // namespace

TEST(Cluster, DefaultHasTheHostAndNGpusFullyLinked) {
  Cluster c = Cluster::defaultCluster(4);
  ASSERT_EQ(c.devices().size(), 5u);
  EXPECT_EQ(c.host().name, "cpu:0");
  EXPECT_EQ(c.numGpus(), 4u);
  EXPECT_EQ(c.links().size(), 4u + 6u);
  const ClusterDevice *g3 = c.find("gpu:3");
  ASSERT_NE(g3, nullptr);
  EXPECT_EQ(g3->kind, DeviceKind::GPU);
  EXPECT_EQ(g3->memoryBytes, 80LL << 30);
  EXPECT_EQ(c.peakFlops(*g3), 67e12);
  EXPECT_EQ(*c.bandwidth("gpu:1", "gpu:3"), 450e9);
  EXPECT_EQ(*c.bandwidth("gpu:2", "cpu:0"), 64e9);
  EXPECT_EQ(c.find("gpu:4"), nullptr);
  EXPECT_EQ(*c.indexOf("gpu:0"), 1u);
}

TEST(Cluster, CheckDeviceListsTheVisibleDevices) {
  Cluster c = Cluster::defaultCluster(4);
  EXPECT_FALSE(bool(c.checkDevice("gpu:3")));
  EXPECT_EQ(llvm::toString(c.checkDevice("gpu:5", "--params device")),
            "--params device 'gpu:5' is not a device of this cluster; visible devices: cpu:0, "
            "gpu:0, gpu:1, gpu:2, gpu:3");
  EXPECT_EQ(Cluster::defaultCluster(0).visibleDevices(), "visible devices: cpu:0");
}

TEST(Cluster, ParsesAFileAndPutsTheHostFirst) {
  auto c = parseClusterJson(kGood);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  ASSERT_EQ(c->devices().size(), 3u);
  EXPECT_EQ(c->devices()[0].name, "cpu:0");
  EXPECT_EQ(c->devices()[1].name, "gpu:0");
  EXPECT_EQ(c->find("gpu:1")->relativeSpeed, 0.5);
  EXPECT_EQ(c->peakFlops(*c->find("gpu:1")), 10e12);
  EXPECT_EQ(c->kindPeakFlops(DeviceKind::CPU), ClusterDefaults::kCpuPeakFlops);
  // No direct GPU link: the best path through the host, at its slower hop.
  EXPECT_EQ(*c->bandwidth("gpu:0", "gpu:1"), 16e9);
}

TEST(Cluster, RoundTripsThroughJson) {
  Cluster a = Cluster::defaultCluster(2);
  auto b = parseClusterJson(clusterToJson(a));
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  EXPECT_EQ(clusterToJson(*b), clusterToJson(a));
  EXPECT_EQ(b->links().size(), 3u);
}

TEST(Cluster, CalibrationRoundTrips) {
  Cluster a = Cluster::defaultCluster(1);
  KindCalibration k;
  k.launchSeconds = 1e-5;
  k.convFlops = 2e10;
  k.gemmFlops = 1e10;
  k.memoryBytes = 4e9;
  k.measured = "a test";
  k.model = "NVIDIA H200";
  a.setCalibration(DeviceKind::GPU, k);
  auto b = parseClusterJson(clusterToJson(a));
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  EXPECT_EQ(b->calibration(DeviceKind::GPU).convFlops, 2e10);
  EXPECT_EQ(b->calibration(DeviceKind::GPU).measured, "a test");
  EXPECT_EQ(b->calibration(DeviceKind::GPU).model, "NVIDIA H200");
  EXPECT_FALSE(b->calibration(DeviceKind::CPU).present());
  // How calibrated kinds time kernels: tests/placement/analysis/StepTimeModelTest.cpp.
  // Bad figures are one message naming the field.
  std::string bad = clusterToJson(a);
  size_t at = bad.find("\"conv_flops\": "), end = bad.find_first_of(",\n}", at + 14);
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, end - at, "\"conv_flops\": -1");
  EXPECT_NE(parseError(bad).find("calibration.gpu: 'conv_flops' must be a positive number"),
            std::string::npos)
      << parseError(bad);
  // Emulated devices' threads and cores round-trip, and come as a valid pair.
  k.threads = 1;
  k.cores = 2;
  a.setCalibration(DeviceKind::GPU, k);
  auto e = parseClusterJson(clusterToJson(a));
  ASSERT_TRUE(bool(e)) << llvm::toString(e.takeError());
  EXPECT_TRUE(e->calibration(DeviceKind::GPU).emulated());
  EXPECT_EQ(e->calibration(DeviceKind::GPU).cores, 2u);
  std::string unpaired = clusterToJson(a);
  at = unpaired.find("\"cores\": 2");
  ASSERT_NE(at, std::string::npos);
  unpaired.replace(at, 10, "\"cores\": 0");
  EXPECT_NE(
      parseError(unpaired).find("'threads' and 'cores' (emulated devices) must both be given"),
      std::string::npos)
      << parseError(unpaired);
}

TEST(Cluster, CalibratedFilesAreNamedByTheirModel) {
  EXPECT_EQ(calibratedClusterFileName("NVIDIA H200"), "nvidia-h200.json");
  EXPECT_EQ(calibratedClusterFileName("  NVIDIA H100 80GB HBM3 "), "nvidia-h100-80gb-hbm3.json");
  EXPECT_EQ(calibratedClusterFileName("a/../b"), "a-b.json"); // never a path
  EXPECT_EQ(calibratedClusterFileName(" -/- "), "");
  EXPECT_EQ(calibratedClusterFileName(""), "");
}

TEST(Cluster, OfCalibratedCopiesTheFilesGpuNTimes) {
  auto file = parseClusterJson(kGood);
  ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
  auto uncalibrated = Cluster::ofCalibrated(*file, 3);
  ASSERT_FALSE(bool(uncalibrated));
  EXPECT_NE(llvm::toString(uncalibrated.takeError()).find("no GPU calibration"), std::string::npos);

  KindCalibration k;
  k.launchSeconds = 1e-5;
  k.convFlops = k.gemmFlops = k.memoryBytes = 1e9;
  k.model = "Test GPU";
  file->setCalibration(DeviceKind::GPU, k);
  auto c = Cluster::ofCalibrated(*file, 3);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  ASSERT_EQ(c->devices().size(), 4u);
  EXPECT_EQ(c->host().memoryBytes, 274877906944);
  for (unsigned i = 0; i < 3; ++i) {
    const ClusterDevice *g = c->find(DeviceId::gpu(i));
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->memoryBytes, 42949672960) << i; // gpu:0's, not gpu:1's
    EXPECT_EQ(g->relativeSpeed, 1.0) << i;
    EXPECT_EQ(c->bandwidth("cpu:0", g->name), 32e9) << i; // the file's host - gpu:0 link
  }
  // The file joins no two GPUs: theirs is the default NVLink figure.
  EXPECT_EQ(c->links().size(), 3u + 3u);
  EXPECT_EQ(c->bandwidth("gpu:1", "gpu:2"), ClusterDefaults::kGpuGpuBandwidth);
  EXPECT_EQ(c->kindPeakFlops(DeviceKind::GPU), 20e12);
  EXPECT_EQ(c->calibration(DeviceKind::GPU).model, "Test GPU");
  EXPECT_EQ(c->calibration(DeviceKind::GPU).convFlops, 1e9);

  auto hostOnly = parseClusterJson(R"({"devices": [{"name": "cpu:0", "kind": "cpu",
    "memory_bytes": 1e9, "relative_speed": 1}]})");
  ASSERT_TRUE(bool(hostOnly));
  auto none = Cluster::ofCalibrated(*hostOnly, 2);
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("needs the GPU 'gpu:0'"), std::string::npos);
}

TEST(Cluster, UnconnectedDevicesHaveNoBandwidth) {
  auto c = parseClusterJson(R"({"devices": [
    {"name": "cpu:0", "kind": "cpu", "memory_bytes": 1000, "relative_speed": 1},
    {"name": "gpu:0", "kind": "gpu", "memory_bytes": 1000, "relative_speed": 1}]})");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_FALSE(c->bandwidth("cpu:0", "gpu:0").has_value());
}

TEST(Cluster, FileErrorsNameWhatIsWrong) {
  auto dev = [](const std::string &body) { return "{\"devices\": [" + body + "]}"; };
  const std::string host =
      R"({"name": "cpu:0", "kind": "cpu", "memory_bytes": 1000, "relative_speed": 1})";
  const std::string gpu0 =
      R"({"name": "gpu:0", "kind": "gpu", "memory_bytes": 1000, "relative_speed": 1})";

  EXPECT_EQ(parseError(dev(host + "," + gpu0 + "," + gpu0)),
            "device 'gpu:0' is listed twice (devices[1] and devices[2])");
  EXPECT_EQ(parseError(dev(host + R"(, {"name": "gpu:1", "kind": "gpu", "relative_speed": 1})")),
            "devices[1] ('gpu:1'): missing field 'memory_bytes'");
  EXPECT_EQ(parseError(dev(R"({"kind": "cpu", "memory_bytes": 1, "relative_speed": 1})")),
            "devices[0]: missing field 'name'");
  EXPECT_EQ(parseError(dev(R"({"name": "cpu:0", "memory_bytes": 1, "relative_speed": 1})")),
            "devices[0] ('cpu:0'): missing field 'kind'");
  EXPECT_EQ(parseError(dev(R"({"name": "cpu:0", "kind": "cpu", "memory_bytes": 1})")),
            "devices[0] ('cpu:0'): missing field 'relative_speed'");
  EXPECT_EQ(parseError(dev(R"({"name": "cpu:0", "kind": "tpu", "memory_bytes": 1,
                              "relative_speed": 1})")),
            "devices[0] ('cpu:0'): kind 'tpu' is not one of cpu, gpu");
  EXPECT_EQ(parseError(dev(R"({"name": "cpu:0", "kind": "cpu", "memory_bytes": "lots",
                              "relative_speed": 1})")),
            "devices[0] ('cpu:0'): field 'memory_bytes' must be a number");
  EXPECT_EQ(parseError(dev(host + R"(, {"name": "gpu:0", "kind": "cpu", "memory_bytes": 1,
                                        "relative_speed": 1})")),
            "device 'gpu:0': a cpu device must be named 'cpu:<index>'");
  EXPECT_EQ(
      parseError(dev(host + R"(, {"name": "gpu:0", "kind": "gpu", "memory_bytes": 1,
                                        "relative_speed": 0})")),
      "device 'gpu:0': relative speed must be positive and finite, got 0 (a device that never "
      "finishes its work cannot be placed on or given a share of the batch: leave it out of "
      "the cluster)");
  EXPECT_EQ(parseError(dev(host + R"(, {"name": "gpu:0", "kind": "gpu", "memory_bytes": 1,
                                        "relative_speed": 1, "colour": "red"})")),
            "devices[1] ('gpu:0'): unknown field 'colour' (known: name, kind, memory_bytes, "
            "relative_speed)");
  EXPECT_EQ(parseError(dev(gpu0)), "a cluster needs the host device 'cpu:0'");

  auto links = [&](const std::string &body) {
    return "{\"devices\": [" + host + "," + gpu0 + "], \"links\": [" + body + "]}";
  };
  EXPECT_EQ(parseError(links(R"({"endpoints": ["cpu:0", "gpu:7"], "bandwidth": 1e9})")),
            "link 0 ('cpu:0' - 'gpu:7'): endpoint 'gpu:7' is not a device of this cluster; "
            "visible devices: cpu:0, gpu:0");
  EXPECT_EQ(parseError(links(R"({"endpoints": ["cpu:0", "gpu:0"]})")),
            "links[0]: missing field 'bandwidth'");
  EXPECT_EQ(parseError(links(R"({"bandwidth": 1e9})")), "links[0]: missing field 'endpoints'");
  EXPECT_EQ(parseError(links(R"({"endpoints": ["cpu:0"], "bandwidth": 1e9})")),
            "links[0]: 'endpoints' must list two device names");
  EXPECT_EQ(parseError(links(R"({"endpoints": ["gpu:0", "gpu:0"], "bandwidth": 1e9})")),
            "link 0 ('gpu:0' - 'gpu:0') joins a device to itself");
  EXPECT_EQ(parseError(links(R"({"endpoints": ["cpu:0", "gpu:0"], "bandwidth": 1e9},
                                {"endpoints": ["gpu:0", "cpu:0"], "bandwidth": 2e9})")),
            "link 1 ('gpu:0' - 'cpu:0') repeats link 0");
  EXPECT_EQ(parseError(links(R"({"endpoints": ["cpu:0", "gpu:0"], "bandwidth": -1})")),
            "link 0 ('cpu:0' - 'gpu:0'): bandwidth must be positive, got -1.000000");
  // 1e999 reads as infinity, which clusterToJson could not write back as JSON.
  auto peaks = [&](const std::string &body) {
    return "{\"devices\": [" + host + "], \"peak_flops\": {" + body + "}}";
  };
  EXPECT_EQ(parseError(peaks(R"("cpu": 1e999)")),
            "peak FLOP/s of cpu devices must be positive and finite, got inf");
  EXPECT_EQ(parseError(peaks(R"("gpu": 0)")),
            "peak FLOP/s of gpu devices must be positive and finite, got 0");

  EXPECT_EQ(parseError("{\"devices\": ["), parseError("{\"devices\": [")); // stable
  EXPECT_EQ(parseError("{\"devices\": [").rfind("cluster file is not valid JSON: ", 0), 0u);
  EXPECT_EQ(parseError("[]"), "cluster file must hold one JSON object");
  EXPECT_EQ(parseError("{}"), "cluster: missing field 'devices'");
  EXPECT_EQ(parseError(R"({"devices": [], "gpus": 4})"),
            "cluster: unknown field 'gpus' (known: devices, links, peak_flops, calibration)");
}

TEST(Cluster, LoadsFilesAndNamesThePathInErrors) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("cluster", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"({"devices": [{"name": "cpu:0", "kind": "cpu", "memory_bytes": 1e9,
                           "relative_speed": 1}, {"name": "gpu:0"}]})";
  }
  auto c = loadClusterFile(path);
  ASSERT_FALSE(bool(c));
  EXPECT_EQ(llvm::toString(c.takeError()),
            path.str().str() + ": devices[1] ('gpu:0'): missing field 'kind'");
  llvm::sys::fs::remove(path);
  auto missing = loadClusterFile("/nonexistent/cluster.json");
  ASSERT_FALSE(bool(missing));
  EXPECT_EQ(llvm::toString(missing.takeError())
                .rfind("cannot read cluster file '/nonexistent/cluster.json': ", 0),
            0u);
}

// 100,000 nested '[' overflowed the stack in llvm::json's recursive parser.
TEST(Cluster, DeepNestingIsRefusedBeforeParsing) {
  std::string deep(100000, '[');
  EXPECT_EQ(parseError(deep), "cluster file nests arrays and objects 100000 deep; a cluster "
                              "description needs 4 (at most 16 are read)");
  std::string objects;
  for (int i = 0; i < 20; ++i)
    objects += "{\"a\": ";
  EXPECT_EQ(parseError(objects).rfind("cluster file nests arrays and objects 20 deep", 0), 0u);
  // Brackets inside strings do not count.
  EXPECT_EQ(parseError("{\"devices\": [], \"x\": \"[[[[[[[[[[[[[[[[[[[[[[\\\"[[[[\"}"),
            "cluster: unknown field 'x' (known: devices, links, peak_flops, calibration)");
  EXPECT_EQ(parseError(kGood), "(parsed)");
}

TEST(Cluster, DeviceCountIsBounded) {
  std::string devices =
      R"({"name": "cpu:0", "kind": "cpu", "memory_bytes": 1, "relative_speed": 1})";
  for (unsigned i = 0; i < Cluster::kMaxDevices; ++i)
    devices += R"(, {"name": "gpu:)" + std::to_string(i) +
               R"(", "kind": "gpu", "memory_bytes": 1, "relative_speed": 1})";
  EXPECT_EQ(parseError("{\"devices\": [" + devices + "]}"),
            "the cluster has 1025 devices; graphc places on at most 1024");
}

TEST(Cluster, NamesFromTheFileAreQuotedOnOneLine) {
  std::string msg = parseError(R"({"devices": [{"name": "cpu:0\nX", "kind": "cpu",
                                   "memory_bytes": 1, "relative_speed": 1}]})");
  EXPECT_EQ(msg, "device 'cpu:0\\nX': a cpu device must be named 'cpu:<index>'");
  msg = parseError(R"({"devices": [], "bad\u001b[2J": 1})");
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown field 'bad\\x1B[2J'"), std::string::npos) << msg;
}

TEST(Cluster, TowerSpeedsForSplitAuto) {
  auto c = Cluster::create({{"cpu:0", DeviceKind::CPU, 1 << 20, 1},
                            {"gpu:0", DeviceKind::GPU, 1 << 20, 1},
                            {"gpu:1", DeviceKind::GPU, 1 << 20, 0.5},
                            {"gpu:3", DeviceKind::GPU, 1 << 20, 2}},
                           {}, 1e12, 10e12);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->find("gpu:1")->id, DeviceId::gpu(1));
  auto two = c->towerSpeeds(2);
  ASSERT_TRUE(bool(two)) << llvm::toString(two.takeError());
  EXPECT_EQ(*two, (std::vector<double>{10e12, 5e12}));
  auto three = c->towerSpeeds(3);
  ASSERT_FALSE(bool(three));
  EXPECT_EQ(llvm::toString(three.takeError()),
            "--split auto: tower 2's device 'gpu:2' is not a device of this cluster; visible "
            "devices: cpu:0, gpu:0, gpu:1, gpu:3");
}
