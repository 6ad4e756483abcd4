//===- MakeSeeds.cpp - The fuzz targets' seed corpora ---------------------===//
//
// fuzz_seeds DIR writes one folder per fuzz target under DIR, each holding
// well-formed inputs made by graphc itself: the built-in models' text IR
// (forward, compiled for training, placed on two GPUs), their ONNX exports,
// module files, checkpoints of a short training run, cluster files (of devices
// and of tasks, TF_CONFIG among them), .npy tensors of every NumPy dtype, IDX
// files (plain and gzip) and PNG and JPEG images. Nothing is committed: the seeds follow the
// formats as they change. Models are built small (narrow MLP, small images, ONNX initializers over
// 64 elements written without data, as graph-only models are) so that the fuzzer's inputs stay
// small and its executions fast.
//
//===----------------------------------------------------------------------===//

#include "executor/Checkpoint.h"
#include "executor/dist/WorldOfOne.h"
#include "frontend/models/Models.h"
#include "frontend/onnx/OnnxExporter.h"
#include "ir/Archive.h"
#include "ir/Cluster.h"
#include "ir/Npy.h"
#include "ir/OutputFile.h"
#include "ir/Printer.h"
#include "ir/Tasks.h"
#include "passes/strategy/Compile.h"
#include "passes/strategy/CompilePlan.h"
#include "tools/driver/Trainer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>
#include <png.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <cstdlib>

using namespace graphc;

namespace {

std::string root;

[[noreturn]] void fail(const llvm::Twine &what) {
  llvm::errs() << "fuzz_seeds: " << what << "\n";
  std::exit(1);
}

template <typename T> T check(llvm::Expected<T> value, llvm::StringRef what) {
  if (!value)
    fail(what + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}

/// The path of seed `name` of `target` (its folder created).
std::string seedPath(llvm::StringRef target, llvm::StringRef name) {
  std::string dir = root + "/" + target.str();
  if (auto ec = llvm::sys::fs::create_directories(dir))
    fail(dir + ": " + ec.message());
  return dir + "/" + name.str();
}

void write(llvm::StringRef target, llvm::StringRef name, llvm::StringRef bytes) {
  if (auto e = writeOutputFile(seedPath(target, name), bytes))
    fail(llvm::toString(std::move(e)));
}

void writeModule(llvm::StringRef name, const Module &m) {
  if (auto e = writeModuleFile(seedPath("module_file", name), m))
    fail(llvm::toString(std::move(e)));
}

struct SmallModel {
  const char *name;
  models::ModelOptions options;
};

std::vector<SmallModel> smallModels() {
  models::ModelOptions mlp, grey, rgb;
  mlp.hiddenSizes = {8};
  grey.imageSize = 28;
  rgb.imageSize = 75; // inception_v3's smallest input
  models::ModelOptions resnet;
  resnet.imageSize = 32;
  return {{"mlp", mlp},
          {"small_cnn", grey},
          {"small_cnn_nobn", grey},
          {"resnet18", resnet},
          {"inception_v3", rgb}};
}

/// ONNX bytes with every initializer over 64 elements stripped of its data.
std::string graphOnly(llvm::StringRef bytes) {
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    fail("cannot read back an exported ONNX model");
  for (auto &t : *model.mutable_graph()->mutable_initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    if (n > 64) {
      t.clear_raw_data();
      t.clear_float_data();
    }
  }
  return model.SerializeAsString();
}

void modelSeeds() {
  for (const SmallModel &s : smallModels()) {
    std::string name = s.name;
    auto forward = check(models::buildModel(name, s.options), name);
    write("text_ir", name + ".gir", toText(*forward));
    write("onnx", name + ".onnx",
          graphOnly(check(exportOnnxBytes(*forward, 0, ExportForm::Training), name + " export")));
    if (name == "inception_v3" || name == "resnet18")
      continue; // their training graphs are large; the small models cover the same ops
    CompileRequest req;
    req.options.batch = 4;
    auto training = check(compileTraining(*forward, req), name + " compile");
    write("text_ir", name + ".train.gir", toText(*training));
    writeModule(name + ".train.gm", *training);
    PlacementRequest place;
    place.gpus = 2;
    auto placed = check(compilePlan(*forward, req, place), name + " place");
    write("text_ir", name + ".placed.gir", toText(*placed));
    writeModule(name + ".placed.gm", *placed);
  }
}

void checkpointSeeds() {
  std::string dir = root + "/work-checkpoints";
  TrainOptions opts;
  opts.model.name = "mlp";
  opts.model.options.hiddenSizes = {8};
  opts.compile.options.batch = 4;
  opts.steps = 2;
  opts.checkpointDir = dir;
  opts.checkpointEvery = 1;
  opts.progress = false;
  opts.evaluate = false;
  opts.synthetic.samples = 16;
  std::string log;
  llvm::raw_string_ostream out(log);
  WorldOfOne alone;
  check(runTraining(opts, out, alone), "training mlp for checkpoints");
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef file = it->path();
    if (!file.endswith(".gck"))
      continue;
    auto bytes = llvm::MemoryBuffer::getFile(file);
    if (!bytes)
      fail(file + ": " + bytes.getError().message());
    write("checkpoint", llvm::sys::path::filename(file), (*bytes)->getBuffer());
  }
  llvm::sys::fs::remove_directories(dir);
}

void clusterSeeds() {
  for (int gpus : {1, 4}) {
    PlacementRequest place;
    place.gpus = gpus;
    write("cluster", "gpus" + std::to_string(gpus) + ".json",
          clusterToJson(check(clusterFor(place), "cluster")));
  }
  write("cluster", "hand.json",
        R"({"devices": [{"name": "cpu:0", "kind": "cpu", "memory_bytes": 1e12},
 {"name": "gpu:0", "kind": "gpu", "memory_bytes": 8e9, "relative_speed": 0.5}],
 "links": [{"endpoints": ["cpu:0", "gpu:0"], "bandwidth": 16e9}],
 "peak_flops": {"cpu": 1e12, "gpu": 2e13}})");
}

void taskSeeds() {
  write("tasks", "uniform.json", tasksToJson(TaskCluster::uniform(3, 2, 2)));
  write("tasks", "hetero.json",
        R"({"chief": [{"host": "node0", "gpus": 2}], "worker": [{"host": "node1", "gpus": 1},
 "node2:2222"], "ps": ["node3:2222"]})");
  write("tasks", "tf_config.json",
        R"({"cluster": {"chief": ["node0:2222"], "worker": ["node1:2222", "node2:2222"],
 "ps": ["node3:2222"]}, "task": {"type": "worker", "index": 1}})");
}

void npySeeds() {
  for (DType dt : kAllDTypes) {
    if (dt == DType::BF16)
      continue; // no NumPy dtype
    for (auto dims : {std::vector<int64_t>{}, {3}, {2, 3}, {0, 2}}) {
      Tensor t(TensorType(dt, dims));
      auto *bytes = static_cast<uint8_t *>(t.raw());
      for (size_t i = 0; i < t.bytes(); ++i)
        bytes[i] = dt == DType::Bool ? uint8_t(i % 2) : uint8_t(i * 7 + 1);
      std::string name = std::string(dtypeName(dt)) + "_" + std::to_string(dims.size()) + "d" +
                         (dims.size() == 2 && dims[0] == 0 ? "_empty" : "") + ".npy";
      write("npy", name, check(encodeNpy(t), "npy"));
    }
  }
}

std::string gzip(llvm::StringRef bytes) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    fail("deflateInit2");
  std::string out(deflateBound(&z, bytes.size()), '\0');
  z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  z.next_out = reinterpret_cast<Bytef *>(out.data());
  z.avail_out = uInt(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END)
    fail("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idxSeeds() {
  auto idx = [](std::vector<uint32_t> dims) {
    std::string s = {0, 0, 8, char(dims.size())};
    size_t n = 1;
    for (uint32_t d : dims) {
      n *= d;
      for (int shift = 24; shift >= 0; shift -= 8)
        s += char((d >> shift) & 0xff);
    }
    for (size_t i = 0; i < n; ++i)
      s += char(i % 10);
    return s;
  };
  std::string images = idx({3, 4, 4}), labels = idx({3});
  write("idx", "images.idx", images);
  write("idx", "labels.idx", labels);
  write("idx", "images.idx.gz", gzip(images));
  write("idx", "labels.idx.gz", gzip(labels));
}

void imageSeeds() {
  const int w = 7, h = 5;
  for (auto [format, channels, name] : {std::tuple{PNG_FORMAT_RGB, 3, "rgb.png"},
                                        {PNG_FORMAT_GRAY, 1, "grey.png"},
                                        {PNG_FORMAT_RGBA, 4, "rgba.png"}}) {
    std::vector<uint8_t> pixels(size_t(w) * h * channels);
    for (size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = uint8_t(i * 37);
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    image.width = w;
    image.height = h;
    image.format = format;
    png_alloc_size_t size = 0;
    if (!png_image_write_get_memory_size(image, size, 0, pixels.data(), 0, nullptr))
      fail("png size");
    std::string out(size, '\0');
    if (!png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data(), 0, nullptr))
      fail(std::string("png: ") + image.message);
    out.resize(size);
    write("image", name, out);
  }
  tjhandle tj = tjInitCompress();
  for (auto [format, samp, name] :
       {std::tuple{TJPF_RGB, TJSAMP_420, "rgb.jpg"}, {TJPF_GRAY, TJSAMP_GRAY, "grey.jpg"}}) {
    std::vector<uint8_t> pixels(size_t(w) * h * tjPixelSize[format]);
    for (size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = uint8_t(i * 37);
    unsigned char *jpeg = nullptr;
    unsigned long size = 0;
    if (tjCompress2(tj, pixels.data(), w, 0, h, format, &jpeg, &size, samp, 90, 0))
      fail(std::string("jpeg: ") + tjGetErrorStr2(tj));
    write("image", name, llvm::StringRef(reinterpret_cast<char *>(jpeg), size));
    tjFree(jpeg);
  }
  tjDestroy(tj);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2)
    fail("usage: fuzz_seeds DIR");
  root = argv[1];
  modelSeeds();
  checkpointSeeds();
  clusterSeeds();
  taskSeeds();
  npySeeds();
  idxSeeds();
  imageSeeds();
  return 0;
}
