//===- IdxTest.cpp - IDX files: small generated ones, malformed ones, Fashion-MNIST ===//
#include "TestSupport.h"

#include "executor/data/IdxDataset.h"
#include "executor/data/OpenDataset.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>
#include <zlib.h>

using namespace graphc;
using namespace graphc::testing;

namespace {

std::string bigEndian(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}

/// An IDX file: magic, dims, then `data`.
std::string idxBytes(uint32_t magic, llvm::ArrayRef<uint32_t> dims, llvm::StringRef data) {
  std::string s = bigEndian(magic);
  for (uint32_t d : dims)
    s += bigEndian(d);
  return s + data.str();
}

void writeGzip(const std::string &path, llvm::StringRef bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), (unsigned)bytes.size()), (int)bytes.size());
  gzclose(f);
}

std::string pixels(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s.push_back(char((i * 37 + 11) % 256));
  return s;
}

/// Four 3×2 images with labels 3 1 4 1, gzip-compressed (or plain) in `dir`.
void writeSmallSet(const std::string &dir, llvm::StringRef prefix, bool gz) {
  std::string images = idxBytes(0x803, {4, 3, 2}, pixels(24));
  std::string labels = idxBytes(0x801, {4}, llvm::StringRef("\x03\x01\x04\x01", 4));
  std::string ext = gz ? ".gz" : "";
  std::string ip = dir + "/" + prefix.str() + "-images-idx3-ubyte" + ext;
  std::string lp = dir + "/" + prefix.str() + "-labels-idx1-ubyte" + ext;
  if (gz) {
    writeGzip(ip, images);
    writeGzip(lp, labels);
  } else {
    writeFile(ip, images);
    writeFile(lp, labels);
  }
}

std::string openError(const std::string &dir, Split split = Split::Train) {
  auto ds = IdxDataset::open(dir, split);
  if (ds)
    return "(opened)";
  return llvm::toString(ds.takeError());
}

} // namespace

TEST(Idx, ReadsSmallGzipAndPlainFiles) {
  std::string dir = freshDir("idx-small");
  writeSmallSet(dir, "train", /*gz=*/true);
  writeSmallSet(dir, "t10k", /*gz=*/false);
  for (Split split : {Split::Train, Split::Test}) {
    auto ds = IdxDataset::open(dir, split);
    ASSERT_TRUE(bool(ds)) << llvm::toString(ds.takeError());
    EXPECT_EQ((*ds)->size(), 4);
    EXPECT_EQ((*ds)->numClasses(), 10);
    EXPECT_EQ((*ds)->shape(), (SampleShape{1, 3, 2}));
    std::string raw = pixels(24);
    const int64_t expectedLabels[4] = {3, 1, 4, 1};
    for (int64_t i = 0; i < 4; ++i) {
      float px[6];
      int64_t label = -1;
      ASSERT_FALSE(bool((*ds)->load(i, px, label)));
      EXPECT_EQ(label, expectedLabels[i]);
      for (int k = 0; k < 6; ++k) {
        double v = (uint8_t)raw[i * 6 + k] / 255.0;
        EXPECT_NEAR(px[k], (v - 0.2860) / 0.3530, 1e-5);
      }
    }
  }
}

TEST(Idx, BadMagicNamesTheFile) {
  std::string dir = freshDir("idx-magic");
  writeSmallSet(dir, "train", true);
  // Type 0x09 (signed bytes) instead of 0x08.
  writeGzip(dir + "/train-images-idx3-ubyte.gz", idxBytes(0x903, {4, 3, 2}, pixels(24)));
  std::string err = openError(dir);
  EXPECT_NE(err.find(dir + "/train-images-idx3-ubyte.gz: bad magic number 0x00000903"),
            std::string::npos)
      << err;
  // Labels file with 3 dimensions.
  writeSmallSet(dir, "train", true);
  writeGzip(dir + "/train-labels-idx1-ubyte.gz", idxBytes(0x803, {4, 1, 1}, "abcd"));
  err = openError(dir);
  EXPECT_NE(err.find("train-labels-idx1-ubyte.gz: bad magic number 0x00000803 (expected "
                     "0x00000801"),
            std::string::npos)
      << err;
}

TEST(Idx, TruncatedFilesNameTheFile) {
  std::string dir = freshDir("idx-truncated");
  writeSmallSet(dir, "train", true);
  // Plain data shorter than the header says.
  std::string path = dir + "/train-images-idx3-ubyte.gz";
  writeGzip(path, idxBytes(0x803, {4, 3, 2}, pixels(20)));
  std::string err = openError(dir);
  EXPECT_NE(err.find(path + ": truncated: the header declares 24 elements but the file holds 20"),
            std::string::npos)
      << err;

  // A gzip stream cut short.
  writeGzip(path, idxBytes(0x803, {4, 3, 2}, pixels(24)));
  auto whole = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(whole));
  writeFile(path, (*whole)->getBuffer().take_front((*whole)->getBufferSize() - 12));
  err = openError(dir);
  EXPECT_EQ(err.find(path + ": "), 0u) << err;
  EXPECT_NE(err.find("unexpected end of file"), std::string::npos) << err;

  // A header cut short.
  writeGzip(path, bigEndian(0x803) + bigEndian(4));
  err = openError(dir);
  EXPECT_NE(err.find(path + ": truncated header: 8 of 16 bytes"), std::string::npos) << err;

  // Fewer than four bytes.
  writeGzip(path, "ab");
  err = openError(dir);
  EXPECT_NE(err.find(path + ": not an IDX file"), std::string::npos) << err;
}

TEST(Idx, InconsistentFilesAreErrors) {
  std::string dir = freshDir("idx-inconsistent");
  writeSmallSet(dir, "train", true);
  std::string images = dir + "/train-images-idx3-ubyte.gz";
  std::string labels = dir + "/train-labels-idx1-ubyte.gz";

  writeGzip(images, idxBytes(0x803, {4, 3, 2}, pixels(25)));
  std::string err = openError(dir);
  EXPECT_NE(err.find(images + ": trailing data after the 24 elements"), std::string::npos) << err;

  writeGzip(images, idxBytes(0x803, {5, 3, 2}, pixels(30)));
  err = openError(dir);
  EXPECT_NE(err.find(images + " holds 5 images but " + labels + " holds 4 labels"),
            std::string::npos)
      << err;

  writeSmallSet(dir, "train", true);
  writeGzip(labels, idxBytes(0x801, {4}, llvm::StringRef("\x03\x01\x0a\x01", 4)));
  err = openError(dir);
  EXPECT_NE(err.find(labels + ": label 10 of sample 2 is outside [0, 10)"), std::string::npos)
      << err;

  writeSmallSet(dir, "train", true);
  writeGzip(images, idxBytes(0x803, {4, 0, 2}, ""));
  err = openError(dir);
  EXPECT_NE(err.find(images + ": dimension 1 has size 0"), std::string::npos) << err;
}

TEST(Idx, MissingFilesAreNamed) {
  std::string dir = freshDir("idx-missing");
  std::string err = openError(dir, Split::Test);
  EXPECT_NE(err.find("neither " + dir + "/t10k-images-idx3-ubyte.gz nor " + dir +
                     "/t10k-images-idx3-ubyte exists"),
            std::string::npos)
      << err;
  err = openError(dir + "/nowhere");
  EXPECT_NE(err.find(dir + "/nowhere is not a directory"), std::string::npos) << err;
}

TEST(Idx, RealFashionMnistAgreesWithNumpy) {
  if (!llvm::sys::fs::is_directory(kFashionMnistDir))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  std::string ref = referenceDir();
  ASSERT_FALSE(ref.empty());
  for (Split split : {Split::Train, Split::Test}) {
    std::string name = split == Split::Train ? "train" : "t10k";
    DatasetOptions opts;
    opts.split = split;
    auto opened = openDataset("fashion-mnist", opts);
    ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
    auto *ds = static_cast<IdxDataset *>(opened->get());
    EXPECT_EQ(ds->size(), split == Split::Train ? 60000 : 10000);
    EXPECT_EQ(ds->shape(), (SampleShape{1, 28, 28}));

    Tensor labels = loadNpy(ref + "/fmnist/" + name + "_labels.npy");
    Tensor images = loadNpy(ref + "/fmnist/" + name + "_images_first.npy");
    ASSERT_EQ(labels.numElements(), ds->size());
    std::vector<float> px(28 * 28);
    std::vector<int64_t> histogram(10, 0);
    for (int64_t i = 0; i < ds->size(); ++i) {
      int64_t label = -1;
      ASSERT_FALSE(bool(ds->load(i, px.data(), label)));
      ASSERT_EQ(label, labels.data<int64_t>()[i]) << "sample " << i;
      ++histogram[label];
    }
    // Fashion-MNIST is balanced: 6000 (or 1000) of each class.
    for (int64_t n : histogram)
      EXPECT_EQ(n, ds->size() / 10);
    for (int64_t i = 0; i < 3; ++i) {
      int64_t label = 0;
      ASSERT_FALSE(bool(ds->load(i, px.data(), label)));
      for (int64_t k = 0; k < 28 * 28; ++k) {
        int32_t raw = images.data<int32_t>()[i * 784 + k];
        ASSERT_EQ(ds->rawPixel(i, k / 28, k % 28), raw);
        ASSERT_NEAR(px[k], (raw / 255.0 - 0.2860) / 0.3530, 1e-5);
      }
    }
  }
  // Constants checked once with numpy: the first training image is an ankle
  // boot (class 9) whose pixels sum to 76247, with 217 at (14, 14).
  auto train = IdxDataset::open(kFashionMnistDir, Split::Train);
  ASSERT_TRUE(bool(train));
  int64_t sum = 0;
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x)
      sum += (*train)->rawPixel(0, y, x);
  EXPECT_EQ(sum, 76247);
  EXPECT_EQ((*train)->rawPixel(0, 14, 14), 217);
}

// A header is never trusted for an allocation: beyond 2^36 elements it is
// refused, and below that the buffer grows only as data arrives.
TEST(Idx, HugeHeadersAllocateNothing) {
  std::string dir = freshDir("idx-huge");
  writeSmallSet(dir, "train", true);
  std::string images = dir + "/train-images-idx3-ubyte.gz";
  writeGzip(images, idxBytes(0x803, {1u << 30, 1u << 30, 1u << 30}, pixels(24)));
  std::string err = openError(dir);
  EXPECT_NE(err.find(images + ": the header declares more than 2^36 elements"), std::string::npos)
      << err;
  writeGzip(images, idxBytes(0x803, {1u << 12, 1u << 12, 1u << 12}, pixels(24)));
  err = openError(dir);
  EXPECT_NE(err.find(images + ": truncated: the header declares 68719476736 elements but the file "
                              "holds 24"),
            std::string::npos)
      << err;
}
