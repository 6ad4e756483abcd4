//===- ImageTest.cpp - Decoding and image folders against PIL and torchvision ===//
#include "TestSupport.h"

#include "executor/data/DataLoader.h"
#include "executor/data/ImageDecode.h"
#include "executor/data/ImageFolderDataset.h"
#include "executor/data/OpenDataset.h"

#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace graphc;
using namespace graphc::testing;

namespace {

/// "cat/a.jpg" → "cat__a.jpg", the reference files' naming.
std::string referenceKey(const std::string &root, const std::string &path) {
  std::string rel = path.substr(root.size() + 1);
  std::string key;
  for (char c : rel)
    key += c == '/' ? std::string("__") : std::string(1, c);
  return key;
}

} // namespace

TEST(Image, DecodingMatchesPil) {
  std::string ref = referenceDir();
  ASSERT_FALSE(ref.empty());
  std::string root = ref + "/images";
  auto ds = ImageFolderDataset::open(root, 8, 8);
  ASSERT_TRUE(bool(ds)) << llvm::toString(ds.takeError());
  int checked = 0;
  for (int64_t i = 0; i < (*ds)->size(); ++i) {
    const std::string &path = (*ds)->path(i);
    std::string expectedPath = ref + "/decoded/" + referenceKey(root, path) + ".npy";
    if (!llvm::sys::fs::exists(expectedPath))
      continue; // a corrupt file
    auto bytes = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(bool(bytes));
    auto image = decodeImage(llvm::ArrayRef<uint8_t>(
        reinterpret_cast<const uint8_t *>((*bytes)->getBufferStart()), (*bytes)->getBufferSize()));
    ASSERT_TRUE(bool(image)) << path << ": " << llvm::toString(image.takeError());
    Tensor expected = loadNpy(expectedPath);
    ASSERT_EQ(expected.shape(), llvm::ArrayRef<int64_t>({image->height, image->width, 3})) << path;
    // PIL decodes JPEG with the same libjpeg-turbo (islow DCT, fancy
    // upsampling), so even JPEG pixels agree exactly.
    for (int64_t k = 0; k < expected.numElements(); ++k)
      ASSERT_EQ((int)image->pixels[k], expected.data<int32_t>()[k]) << path << " byte " << k;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(Image, SixteenBitPngIsScaledNotGammaConverted) {
  std::string ref = referenceDir();
  ASSERT_FALSE(ref.empty());
  auto bytes = llvm::MemoryBuffer::getFile(ref + "/extra/grey16.png");
  ASSERT_TRUE(bool(bytes));
  auto image = decodeImage(llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>((*bytes)->getBufferStart()), (*bytes)->getBufferSize()));
  ASSERT_TRUE(bool(image)) << llvm::toString(image.takeError());
  Tensor values = loadNpy(ref + "/extra/grey16.npy");
  ASSERT_EQ(values.shape(), llvm::ArrayRef<int64_t>({image->height, image->width}));
  for (int64_t k = 0; k < values.numElements(); ++k) {
    double expected = values.data<int32_t>()[k] / 257.0; // 65535 -> 255
    for (int c = 0; c < 3; ++c)
      ASSERT_NEAR(image->pixels[3 * k + c], expected, 0.51) << "pixel " << k;
  }
}

TEST(Image, BadBytesAreErrorsNotCrashes) {
  auto check = [](llvm::StringRef bytes, llvm::StringRef expected) {
    auto image = decodeImage(
        llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
    ASSERT_FALSE(bool(image));
    std::string msg = llvm::toString(image.takeError());
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  };
  check("", "not a JPEG or PNG file");
  check("GIF89a....", "not a JPEG or PNG file");
  check(llvm::StringRef("\xff\xd8\xff\xe0\x00\x10JFIF", 10), "JPEG");
  check(llvm::StringRef("\x89PNG\r\n\x1a\n\x00\x00", 10), "bad PNG header");
}

TEST(Image, FolderMatchesTorchvision) {
  std::string ref = referenceDir();
  ASSERT_FALSE(ref.empty());
  std::string root = ref + "/images";
  DatasetOptions opts;
  opts.shape = {3, 32, 32};
  auto opened = openDataset("images:" + root, opts);
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  auto *ds = static_cast<ImageFolderDataset *>(opened->get());
  EXPECT_EQ(ds->classNames().vec(), (std::vector<std::string>{"cat", "dog", "elk"}));
  EXPECT_EQ(ds->numClasses(), 3);
  EXPECT_EQ(ds->shape(), (SampleShape{3, 32, 32}));

  // Sorted by path; hidden files, notes.txt and files outside class folders
  // are not samples; corrupt files are (they fail on load).
  std::vector<std::string> rel;
  for (int64_t i = 0; i < ds->size(); ++i)
    rel.push_back(ds->path(i).substr(root.size() + 1));
  EXPECT_EQ(rel, (std::vector<std::string>{"cat/a_rgb.jpg", "cat/b_rgb.png", "cat/c_grey.png",
                                           "cat/d_grey.JPG", "cat/y_garbage.png", "dog/e_rgba.png",
                                           "dog/f_palette.png", "dog/h_big.jpeg",
                                           "dog/nested/g_exact.png", "dog/z_truncated.jpg"}));

  std::vector<float> px(3 * 32 * 32);
  for (int64_t i = 0; i < ds->size(); ++i) {
    const std::string &path = ds->path(i);
    int64_t label = -1;
    llvm::Error err = ds->load(i, px.data(), label);
    EXPECT_EQ(label, rel[i].starts_with("cat/") ? 0 : 1);
    std::string expectedPath = ref + "/expected/" + referenceKey(root, path) + ".npy";
    if (!llvm::sys::fs::exists(expectedPath)) {
      ASSERT_TRUE(bool(err)) << path << " is corrupt";
      std::string msg = llvm::toString(std::move(err));
      EXPECT_EQ(msg.find(path + ": corrupt "), 0u) << msg;
      continue;
    }
    ASSERT_FALSE(bool(err)) << llvm::toString(std::move(err));
    Tensor expected = loadNpy(expectedPath);
    ASSERT_EQ(expected.numElements(), (int64_t)px.size());
    // Same decoded bytes (previous test) and a float64 reference: only float
    // rounding differs (measured: at most 5e-7).
    double worst = 0;
    for (size_t k = 0; k < px.size(); ++k)
      worst = std::max(worst, std::abs((double)px[k] - expected.data<float>()[k]));
    EXPECT_LT(worst, 2e-6) << path;

    // Grey files come out with three equal channels before normalisation.
    if (rel[i].find("grey") == std::string::npos)
      continue;
    for (int64_t k = 0; k < 32 * 32; k += 7)
      for (int c = 1; c < 3; ++c)
        EXPECT_NEAR(px[c * 1024 + k] * ImageFolderDataset::kStd[c] + ImageFolderDataset::kMean[c],
                    px[k] * ImageFolderDataset::kStd[0] + ImageFolderDataset::kMean[0], 1e-5);
  }
}

TEST(Image, LoaderSkipsAndCountsCorruptFiles) {
  std::string ref = referenceDir();
  ASSERT_FALSE(ref.empty());
  DatasetOptions opts;
  opts.shape = {3, 32, 32};
  auto opened = openDataset("images:" + ref + "/images", opts);
  ASSERT_TRUE(bool(opened));
  std::shared_ptr<const Dataset> ds = std::move(*opened);

  LoaderOptions lo;
  lo.batch = 4;
  lo.shuffle = false;
  lo.dropLast = false;
  lo.threads = 2;
  auto loader = DataLoader::create(ds, lo);
  ASSERT_TRUE(bool(loader)) << llvm::toString(loader.takeError());
  // Positions 4 (y_garbage.png) and 9 (z_truncated.jpg) are corrupt: batch 1
  // is filled up with position 8, and the 8 good samples make two batches.
  const int64_t expectedIndex[2][4] = {{0, 1, 2, 3}, {5, 6, 7, 8}};
  std::vector<float> px(3 * 32 * 32);
  for (int b = 0; b < 2; ++b) {
    auto batch = (*loader)->next();
    ASSERT_TRUE(bool(batch)) << llvm::toString(batch.takeError());
    ASSERT_TRUE(batch->has_value());
    EXPECT_EQ((*batch)->samples, 4);
    for (int s = 0; s < 4; ++s) {
      int64_t label = -1;
      ASSERT_FALSE(bool(ds->load(expectedIndex[b][s], px.data(), label)));
      EXPECT_EQ((*batch)->labels.data<int64_t>()[s], label);
      EXPECT_EQ(std::memcmp((*batch)->inputs.data<float>() + s * px.size(), px.data(),
                            px.size() * sizeof(float)),
                0)
          << "batch " << b << " row " << s;
    }
  }
  auto end = (*loader)->next();
  ASSERT_TRUE(bool(end));
  EXPECT_FALSE(end->has_value());
  LoaderStats stats = (*loader)->stats();
  EXPECT_EQ(stats.batches, 2);
  EXPECT_EQ(stats.samples, 8);
  EXPECT_EQ(stats.skipped, 2);
  ASSERT_EQ(stats.firstSkipped.size(), 2u);
  EXPECT_NE(stats.firstSkipped[0].find("cat/y_garbage.png: corrupt PNG data"), std::string::npos)
      << stats.firstSkipped[0];
  EXPECT_NE(stats.firstSkipped[1].find("dog/z_truncated.jpg: corrupt JPEG data"), std::string::npos)
      << stats.firstSkipped[1];
}

TEST(Image, FolderWithoutImagesIsAnError) {
  std::string dir = freshDir("images-empty");
  DatasetOptions opts;
  auto expectError = [&](const std::string &spec, llvm::StringRef expected) {
    auto ds = openDataset(spec, opts);
    ASSERT_FALSE(bool(ds)) << spec;
    std::string msg = llvm::toString(ds.takeError());
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  };
  expectError("images:" + dir, "no images (.jpg, .jpeg, .png) in 0 class folders");
  llvm::sys::fs::create_directories(dir + "/a");
  llvm::sys::fs::create_directories(dir + "/b/.git");
  writeFile(dir + "/a/readme.txt", "text");
  writeFile(dir + "/b/.git/x.png", "hidden");
  writeFile(dir + "/top.png", "outside any class");
  expectError("images:" + dir, "no images (.jpg, .jpeg, .png) in 2 class folders");
  expectError("images:" + dir + "/missing", "not a directory");
  expectError("images:", "the directory after ':' is empty");
}

TEST(Image, EpochOfOnlyCorruptFilesIsAnError) {
  std::string dir = freshDir("images-corrupt");
  llvm::sys::fs::create_directories(dir + "/only");
  writeFile(dir + "/only/one.jpg", "not really a jpeg");
  writeFile(dir + "/only/two.png", llvm::StringRef("\x89PNG\r\n\x1a\nbroken", 14));
  auto ds = openDataset("images:" + dir, DatasetOptions());
  ASSERT_TRUE(bool(ds)) << llvm::toString(ds.takeError());
  LoaderOptions lo;
  lo.batch = 4;
  lo.shuffle = false;
  lo.dropLast = false;
  lo.target = {3, 16, 16};
  auto loader = DataLoader::create(std::move(*ds), lo);
  ASSERT_TRUE(bool(loader)) << llvm::toString(loader.takeError());
  auto batch = (*loader)->next();
  ASSERT_FALSE(bool(batch));
  std::string msg = llvm::toString(batch.takeError());
  EXPECT_NE(msg.find("none of the 2 samples of the epoch could be loaded"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("not a JPEG or PNG file"), std::string::npos) << msg;
}

namespace {

/// A PNG that declares width × height RGB pixels; its IDAT holds a few bytes
/// only, so it is refused or found corrupt without being decoded.
std::string pngHeaderOnly(uint32_t width, uint32_t height) {
  auto be32 = [](uint32_t v) {
    return std::string{(char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v};
  };
  auto chunk = [&](llvm::StringRef type, const std::string &data) {
    std::string body = type.str() + data;
    uint32_t crc = llvm::crc32(
        llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(body.data()), body.size()));
    return be32((uint32_t)data.size()) + body + be32(crc);
  };
  std::string ihdr = be32(width) + be32(height) + std::string{8, 2, 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) +
         chunk("IDAT", std::string("\x78\x9c\x03\x00", 4)) + chunk("IEND", "");
}

} // namespace

// A 249 KB PNG of 16000 × 16000 took 52 s and 3.8 GB to train on: its header
// is now refused before anything is decoded.
TEST(Image, PixelBoundIsCheckedBeforeDecoding) {
  std::string big = pngHeaderOnly(16000, 16000);
  auto image = decodeImage(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(big.data()), big.size()));
  ASSERT_FALSE(bool(image));
  EXPECT_EQ(llvm::toString(image.takeError()),
            "PNG image of 16000x16000 pixels is larger than the limit of 64 megapixels");
  // At the bound the header passes and the (missing) data is what is wrong.
  std::string edge = pngHeaderOnly(8192, 8192);
  auto atBound = decodeImage(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(edge.data()), edge.size()));
  ASSERT_FALSE(bool(atBound));
  EXPECT_NE(llvm::toString(atBound.takeError()).find("corrupt PNG data"), std::string::npos);
}

// In a folder the bomb is one more corrupt file: skipped, counted, with why.
TEST(Image, OversizedImagesAreSkippedAsCorrupt) {
  std::string dir = freshDir("images-bomb");
  llvm::sys::fs::create_directories(dir + "/only");
  writeFile(dir + "/only/bomb.png", pngHeaderOnly(16000, 16000));
  auto ds = openDataset("images:" + dir, DatasetOptions());
  ASSERT_TRUE(bool(ds)) << llvm::toString(ds.takeError());
  LoaderOptions lo;
  lo.batch = 1;
  lo.shuffle = false;
  lo.dropLast = false;
  lo.target = {3, 16, 16};
  auto loader = DataLoader::create(std::move(*ds), lo);
  ASSERT_TRUE(bool(loader)) << llvm::toString(loader.takeError());
  auto batch = (*loader)->next();
  ASSERT_FALSE(bool(batch));
  std::string msg = llvm::toString(batch.takeError());
  EXPECT_NE(msg.find("bomb.png: PNG image of 16000x16000 pixels is larger than the limit of 64 "
                     "megapixels"),
            std::string::npos)
      << msg;
}
