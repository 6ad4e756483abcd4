//===- ImageFolderDataset.cpp - A folder of class folders -----------------===//
//
// Scanning uses std::filesystem with error codes (no exceptions). Class
// folders may be symbolic links; links to folders inside a class are not
// followed, so a link loop cannot make the scan endless.
//
//===----------------------------------------------------------------------===//
#include "executor/data/ImageFolderDataset.h"

#include "executor/data/ImageDecode.h"
#include "executor/data/Resize.h"
#include "ir/Diagnostics.h"
#include "ir/InputFile.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <filesystem>

namespace graphc {

namespace fs = std::filesystem;

namespace {

bool isHidden(const fs::path &p) {
  return p.filename().string().starts_with(".");
}

bool hasImageExtension(const fs::path &p) {
  std::string ext = llvm::StringRef(p.extension().string()).lower();
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

/// Image files below `classDir`, sorted by path.
llvm::Expected<std::vector<std::string>> listImages(const fs::path &classDir) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(classDir, fs::directory_options::skip_permission_denied, ec),
      end;
  for (; !ec && it != end; it.increment(ec)) {
    if (isHidden(it->path())) {
      if (it->is_directory(ec))
        it.disable_recursion_pending();
      continue;
    }
    std::error_code typeEc;
    if (it->is_regular_file(typeEc) && hasImageExtension(it->path()))
      files.push_back(it->path().string());
  }
  if (ec)
    return makeError("images: cannot list " + classDir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

} // namespace

llvm::Expected<std::unique_ptr<ImageFolderDataset>>
ImageFolderDataset::open(llvm::StringRef dir, int64_t height, int64_t width) {
  if (height <= 0 || width <= 0)
    return makeError("images:" + dir + ": the target size " + llvm::Twine(height) + "x" +
                     llvm::Twine(width) + " must be positive");
  std::error_code ec;
  fs::path root(dir.str());
  if (!fs::is_directory(root, ec))
    return makeError("images:" + dir + ": not a directory");

  std::vector<std::string> classNames;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code typeEc;
    if (!isHidden(it->path()) && it->is_directory(typeEc))
      classNames.push_back(it->path().filename().string());
  }
  if (ec)
    return makeError("images:" + dir + ": cannot list: " + ec.message());
  std::sort(classNames.begin(), classNames.end());

  std::unique_ptr<ImageFolderDataset> ds(new ImageFolderDataset());
  ds->dir_ = dir.str();
  ds->height_ = height;
  ds->width_ = width;
  for (size_t label = 0; label < classNames.size(); ++label) {
    auto files = listImages(root / classNames[label]);
    if (!files)
      return files.takeError();
    for (std::string &f : *files)
      ds->files_.push_back({std::move(f), (int64_t)label});
  }
  if (ds->files_.empty())
    return makeError("images:" + dir + ": no images (.jpg, .jpeg, .png) in " +
                     llvm::Twine(classNames.size()) +
                     " class folders (expected DIR/<class>/<image>)");
  ds->classNames_ = std::move(classNames);
  return ds;
}

std::string ImageFolderDataset::describe() const {
  return "images " + dir_ + " (" + std::to_string(files_.size()) + " images, " +
         std::to_string(classNames_.size()) + " classes, resized to " + std::to_string(height_) +
         "x" + std::to_string(width_) + ")";
}

Normalization ImageFolderDataset::normalization() const {
  Normalization n;
  n.mean.assign(std::begin(kMean), std::end(kMean));
  n.std.assign(std::begin(kStd), std::end(kStd));
  return n;
}

llvm::Error ImageFolderDataset::load(int64_t index, float *pixels, int64_t &label) const {
  assert(index >= 0 && index < size());
  const File &file = files_[index];
  label = file.label;
  return loadImageFile(file.path, height_, width_, pixels);
}

llvm::Error loadImageFile(llvm::StringRef path, int64_t height, int64_t width, float *pixels) {
  const float *kMean = ImageFolderDataset::kMean, *kStd = ImageFolderDataset::kStd;
  auto buffer = readInputFile(path);
  // Paths are quoted on one line: a file name may hold any byte but '/'.
  if (!buffer)
    return oneLine(buffer.takeError());
  llvm::ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
                                (*buffer)->getBufferSize());
  auto image = decodeImage(bytes);
  if (!image)
    return withContext(image.takeError(), printable(path, 4096));

  // Normalise while taking one channel out of the interleaved pixels; the
  // resize is linear with weights summing to one, so it commutes with
  // normalisation. One channel at a time keeps a large image's float copy to
  // a third.
  ResizePlan plan = planResize(image->height, image->width, height, width);
  int64_t inPlane = image->height * image->width, outPlane = height * width;
  std::vector<float> plane, scratch;
  if (!plan.isIdentity())
    plane.resize(inPlane);
  for (int c = 0; c < 3; ++c) {
    float *dst = plan.isIdentity() ? pixels + c * outPlane : plane.data();
    const uint8_t *src = image->pixels.data() + c;
    float scale = 1.0f / (255.0f * kStd[c]), shift = -kMean[c] / kStd[c];
    for (int64_t i = 0; i < inPlane; ++i, src += 3)
      dst[i] = (float)*src * scale + shift;
    if (!plan.isIdentity())
      resizePlane(plan, plane.data(), pixels + c * outPlane, scratch);
  }
  return llvm::Error::success();
}

} // namespace graphc
