//===- OpenDataset.cpp - A data set by its spec ---------------------------===//
//
// Checks the options a user can get wrong before constructing a data set.
//
//===----------------------------------------------------------------------===//

#include "executor/data/OpenDataset.h"

#include "executor/data/IdxDataset.h"
#include "executor/data/ImageFolderDataset.h"
#include "executor/data/Npz.h"
#include "executor/data/NpzDataset.h"
#include "executor/data/SyntheticDataset.h"
#include "ir/Diagnostics.h"

namespace graphc {

llvm::Expected<std::unique_ptr<Dataset>> openDataset(llvm::StringRef spec,
                                                     const DatasetOptions &options) {
  auto [kind, dir] = spec.split(':');
  bool hasDir = spec.contains(':');
  if (hasDir && dir.empty())
    return makeError("data set '" + spec + "': the directory after ':' is empty");

  if (kind == "synthetic" && !hasDir) {
    const SampleShape &s = options.shape;
    if (s.channels <= 0 || s.height <= 0 || s.width <= 0)
      return makeError("synthetic data: the sample shape " + toString(s) +
                       " must be positive in every dimension");
    if (options.samples <= 0 || options.classes <= 0)
      return makeError("synthetic data: " + llvm::Twine(options.samples) + " samples of " +
                       llvm::Twine(options.classes) + " classes (both must be positive)");
    return std::make_unique<SyntheticDataset>(s, options.samples, options.classes, options.seed,
                                              options.split);
  }
  if (kind == "fashion-mnist") {
    auto ds = IdxDataset::open(hasDir ? dir : llvm::StringRef(kFashionMnistDir), options.split);
    if (!ds)
      return ds.takeError();
    return std::unique_ptr<Dataset>(std::move(*ds));
  }
  if (kind == "images" && hasDir) {
    auto ds = ImageFolderDataset::open(dir, options.shape.height, options.shape.width);
    if (!ds)
      return ds.takeError();
    return std::unique_ptr<Dataset>(std::move(*ds));
  }
  if (kind == "npz" && hasDir) {
    if (!options.tensor)
      return makeError("data set '" + spec + "': npz data needs the model's input to feed");
    auto ds = NpzDataset::open(dir, options.split, *options.tensor);
    if (!ds)
      return ds.takeError();
    return std::unique_ptr<Dataset>(std::move(*ds));
  }
  return makeError("unknown data set '" + spec +
                   "' (expected synthetic, fashion-mnist, fashion-mnist:DIR, images:DIR or "
                   "npz:FILE)");
}

llvm::Expected<bool> hasTestSplit(llvm::StringRef spec) {
  if (spec.startswith("fashion-mnist"))
    return true;
  if (!spec.startswith("npz:"))
    return false;
  auto names = npzArrayNames(spec.drop_front(4));
  if (!names)
    return names.takeError();
  return llvm::is_contained(*names, "x_test") && llvm::is_contained(*names, "y_test");
}

} // namespace graphc
