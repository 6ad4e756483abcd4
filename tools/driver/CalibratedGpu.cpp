#include "tools/driver/CalibratedGpu.h"

#include "executor/DeviceRegistry.h"
#include "ir/Cluster.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace graphc {

namespace {

/// The calibrated clusters kept in `dir`, by file name without ".json".
std::vector<std::string> keptModels(llvm::StringRef dir) {
  std::vector<std::string> kept;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".json")
      kept.push_back(llvm::sys::path::stem(it->path()).str());
  std::sort(kept.begin(), kept.end());
  return kept;
}

} // namespace

std::string calibratedClustersDir() {
  if (const char *dir = std::getenv("GRAPHC_CLUSTERS"); dir && *dir)
    return dir;
  return GRAPHC_SOURCE_CLUSTERS;
}

llvm::Expected<CalibratedGpu> findCalibratedGpu(llvm::StringRef flag, bool emulated) {
  CalibratedGpu found;
  if (flag == "none" || (flag == "auto" && emulated))
    return found;
  const bool named = flag != "auto";
  if (named) {
    found.model = flag.str();
  } else if (std::optional<DeviceModel> gpu = deviceModel(DeviceId::gpu(0))) {
    found.model = gpu->name;
  } else {
    return found; // no physical GPU to name a model
  }
  const std::string dir = calibratedClustersDir();
  const std::string name = calibratedClusterFileName(found.model);
  if (name.empty())
    return makeError("--gpu-model '" + printable(found.model) +
                     "': a model of GPU is named with letters and digits (e.g. \"NVIDIA H200\"), "
                     "or auto, or none");
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  if (!llvm::sys::fs::exists(path)) {
    std::vector<std::string> kept = keptModels(dir);
    std::string what = "no calibrated cluster for " + found.model + " (" + path.str().str() +
                       "; kept: " + (kept.empty() ? "none" : llvm::join(kept, ", ")) + ")";
    if (named)
      return makeError("--gpu-model '" + printable(found.model) + "': " + what +
                       "; `graphrun calibrate --cluster FILE --gpu-model NAME -o " +
                       path.str().str() + "` writes one, --gpu-model none plans with the "
                       "default figures");
    found.note = what + ": the default (H100-like) figures";
    return found;
  }
  // The file's own record of its model, where it has one, must be this one.
  auto cluster = loadClusterFile(path);
  if (!cluster)
    return cluster.takeError();
  const std::string &recorded = cluster->calibration(DeviceKind::GPU).model;
  if (!recorded.empty() && calibratedClusterFileName(recorded) != name)
    return makeError(path.str() + " is calibrated for " + recorded + ", not " + found.model);
  found.file = path.str().str();
  return found;
}

void printCalibrated(const CalibratedGpu &found, llvm::raw_ostream &os) {
  if (!found.file.empty())
    os << "cluster: GPUs of " << found.model << " with the calibrated figures of " << found.file
       << "\n";
  else if (!found.note.empty())
    llvm::errs() << "note: " << found.note << "\n";
}

} // namespace graphc
