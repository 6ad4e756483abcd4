//===- Cluster.cpp - Default clusters, validation, JSON ---------------------===//

#include "ir/Cluster.h"

#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/JsonFields.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace graphc {

/// 0 -> "0", 0.5 -> "0.5", -1e-300 -> "-1e-300".
static std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

Cluster Cluster::uniform(ClusterDevice host, ClusterDevice gpu, int gpus, double hostGpu,
                         double gpuGpu, double cpuPeakFlops, double gpuPeakFlops) {
  assert(gpus >= 0 && (unsigned)gpus < kMaxDevices && "callers bound the GPU count");
  host.name = DeviceId::host().str();
  std::vector<ClusterDevice> devices{host};
  std::vector<Link> links;
  for (int i = 0; i < gpus; ++i) {
    gpu.name = DeviceId::gpu(i).str();
    devices.push_back(gpu);
    links.push_back({host.name, gpu.name, hostGpu});
  }
  for (int i = 0; i < gpus; ++i)
    for (int j = i + 1; j < gpus; ++j)
      links.push_back({DeviceId::gpu(i).str(), DeviceId::gpu(j).str(), gpuGpu});
  auto c = create(std::move(devices), std::move(links), cpuPeakFlops, gpuPeakFlops);
  assert(c && "a uniform cluster of valid devices is valid");
  return std::move(*c);
}

Cluster Cluster::defaultCluster(int gpus) {
  return uniform({"", DeviceKind::CPU, ClusterDefaults::kHostMemory, 1.0},
                 {"", DeviceKind::GPU, ClusterDefaults::kGpuMemory, 1.0}, gpus,
                 ClusterDefaults::kHostGpuBandwidth, ClusterDefaults::kGpuGpuBandwidth,
                 ClusterDefaults::kCpuPeakFlops, ClusterDefaults::kGpuPeakFlops);
}

llvm::Expected<Cluster> Cluster::ofCalibrated(const Cluster &calibrated, int gpus) {
  const ClusterDevice *gpu = calibrated.find(DeviceId::gpu(0));
  if (!gpu)
    return makeError("a calibrated cluster needs the GPU 'gpu:0' whose figures it copies");
  if (!calibrated.calibration(DeviceKind::GPU).present())
    return makeError("the cluster has no GPU calibration (graphrun calibrate writes it)");
  auto linked = [&](DeviceId a, DeviceId b, double otherwise) {
    for (const Link &l : calibrated.links())
      if ((l.a == a.str() && l.b == b.str()) || (l.a == b.str() && l.b == a.str()))
        return l.bandwidth;
    return otherwise;
  };
  Cluster c = uniform(calibrated.host(), *gpu, gpus,
                      linked(DeviceId::host(), DeviceId::gpu(0), ClusterDefaults::kHostGpuBandwidth),
                      linked(DeviceId::gpu(0), DeviceId::gpu(1), ClusterDefaults::kGpuGpuBandwidth),
                      calibrated.kindPeakFlops(DeviceKind::CPU),
                      calibrated.kindPeakFlops(DeviceKind::GPU));
  c.cpuCal_ = calibrated.cpuCal_;
  c.gpuCal_ = calibrated.gpuCal_;
  return c;
}

llvm::Expected<Cluster> Cluster::create(std::vector<ClusterDevice> devices, std::vector<Link> links,
                                        double cpuPeakFlops, double gpuPeakFlops) {
  if (devices.size() > kMaxDevices)
    return makeError("the cluster has " + llvm::Twine(devices.size()) +
                     " devices; graphc places on at most " + llvm::Twine(kMaxDevices));
  llvm::StringMap<unsigned> index;
  for (unsigned i = 0; i < devices.size(); ++i) {
    ClusterDevice &d = devices[i];
    std::string where = "device '" + printable(d.name) + "'";
    std::optional<DeviceId> id = DeviceId::parse(d.name);
    if (!id || id->kind != d.kind)
      return makeError(where + ": a " + deviceKindName(d.kind) + " device must be named '" +
                       deviceKindName(d.kind) + ":<index>'");
    d.id = *id;
    auto [it, inserted] = index.try_emplace(d.name, i);
    if (!inserted)
      return makeError(where + " is listed twice (devices[" + llvm::Twine(it->second) +
                       "] and devices[" + llvm::Twine(i) + "])");
    if (d.memoryBytes <= 0)
      return makeError(where + ": memory must be positive, got " + llvm::Twine(d.memoryBytes));
    if (!(d.relativeSpeed > 0) || !std::isfinite(d.relativeSpeed))
      return makeError(where + ": relative speed must be positive and finite, got " +
                       shortNumber(d.relativeSpeed) +
                       " (a device that never finishes its work cannot be placed on or given a "
                       "share of the batch: leave it out of the cluster)");
  }
  auto host = index.find(DeviceId::host().str());
  if (host == index.end())
    return makeError("a cluster needs the host device 'cpu:0'");
  // Host first: it is the fallback device and the first in every tie.
  std::rotate(devices.begin(), devices.begin() + host->second, devices.begin() + host->second + 1);

  Cluster c;
  c.devices_ = std::move(devices);
  llvm::StringMap<unsigned> linkIndex;
  for (unsigned i = 0; i < links.size(); ++i) {
    const Link &l = links[i];
    std::string where =
        "link " + std::to_string(i) + " ('" + printable(l.a) + "' - '" + printable(l.b) + "')";
    for (const std::string *end : {&l.a, &l.b})
      if (auto e = c.checkDevice(*end, where + ": endpoint"))
        return e;
    if (l.a == l.b)
      return makeError(where + " joins a device to itself");
    std::string key = l.a < l.b ? l.a + "|" + l.b : l.b + "|" + l.a;
    auto [it, inserted] = linkIndex.try_emplace(key, i);
    if (!inserted)
      return makeError(where + " repeats link " + llvm::Twine(it->second));
    if (!(l.bandwidth > 0) || !std::isfinite(l.bandwidth))
      return makeError(where + ": bandwidth must be positive, got " + std::to_string(l.bandwidth));
  }
  for (auto [kind, peak] : {std::pair{"cpu", cpuPeakFlops}, {"gpu", gpuPeakFlops}})
    if (!(peak > 0) || !std::isfinite(peak))
      return makeError(llvm::Twine("peak FLOP/s of ") + kind +
                       " devices must be positive and finite, got " + shortNumber(peak));
  c.links_ = std::move(links);
  c.cpuPeak_ = cpuPeakFlops;
  c.gpuPeak_ = gpuPeakFlops;
  return c;
}

llvm::Expected<std::vector<double>> Cluster::towerSpeeds(unsigned towers) const {
  std::vector<double> speeds;
  for (unsigned t = 0; t < towers; ++t) {
    std::string device = DeviceId::gpu(t).str();
    if (auto e = checkDevice(device, "--split auto: tower " + std::to_string(t) + "'s device"))
      return e;
    double speed = peakFlops(*find(device));
    // Cluster::create refuses non-positive speeds and peaks; a zero here
    // would give a tower no samples and hide the mistake.
    if (!(speed > 0) || !std::isfinite(speed))
      return makeError("--split auto: device '" + device + "' has speed " + shortNumber(speed) +
                       "; every tower's device needs a positive speed");
    speeds.push_back(speed);
  }
  return speeds;
}

const ClusterDevice *Cluster::find(llvm::StringRef name) const {
  for (const ClusterDevice &d : devices_)
    if (d.name == name)
      return &d;
  return nullptr;
}

std::optional<unsigned> Cluster::indexOf(llvm::StringRef name) const {
  for (unsigned i = 0; i < devices_.size(); ++i)
    if (devices_[i].name == name)
      return i;
  return std::nullopt;
}

const ClusterDevice *Cluster::find(DeviceId id) const {
  for (const ClusterDevice &d : devices_)
    if (d.id == id)
      return &d;
  return nullptr;
}

std::optional<unsigned> Cluster::indexOf(DeviceId id) const {
  for (unsigned i = 0; i < devices_.size(); ++i)
    if (devices_[i].id == id)
      return i;
  return std::nullopt;
}

unsigned Cluster::numGpus() const {
  return llvm::count_if(devices_, [](const ClusterDevice &d) { return d.kind == DeviceKind::GPU; });
}

double Cluster::peakFlops(const ClusterDevice &d) const {
  return kindPeakFlops(d.kind) * d.relativeSpeed;
}

std::optional<double> Cluster::bandwidth(llvm::StringRef a, llvm::StringRef b) const {
  auto direct = [&](llvm::StringRef x, llvm::StringRef y) -> double {
    for (const Link &l : links_)
      if ((l.a == x && l.b == y) || (l.a == y && l.b == x))
        return l.bandwidth;
    return 0;
  };
  if (double bw = direct(a, b))
    return bw;
  double best = 0;
  for (const ClusterDevice &mid : devices_)
    best = std::max(best, std::min(direct(a, mid.name), direct(mid.name, b)));
  if (best > 0)
    return best;
  return std::nullopt;
}

std::string Cluster::visibleDevices() const {
  std::vector<std::string> names;
  for (const ClusterDevice &d : devices_)
    names.push_back(d.name);
  return "visible devices: " + llvm::join(names, ", ");
}

llvm::Error Cluster::checkDevice(llvm::StringRef name, llvm::StringRef what) const {
  if (find(name))
    return llvm::Error::success();
  return makeError(what + " '" + printable(name) + "' is not a device of this cluster; " +
                   visibleDevices());
}

//===-- JSON ---------------------------------------------------------------===//

namespace {

/// The most cores an emulated calibration may name.
constexpr unsigned kMaxCores = 4096;

llvm::Expected<ClusterDevice> parseDevice(const llvm::json::Value &v, unsigned i) {
  std::string where = "devices[" + std::to_string(i) + "]";
  const llvm::json::Object *o = v.getAsObject();
  if (!o)
    return makeError(where + " must be an object");
  if (auto name = o->getString("name"))
    where += " ('" + printable(*name) + "')";
  JsonFields f(*o, where);
  ClusterDevice d;
  std::string kind;
  double memory = 0;
  if (auto e = into(f.string("name"), d.name))
    return e;
  if (auto e = into(f.string("kind"), kind))
    return e;
  if (auto e = into(f.number("memory_bytes"), memory))
    return e;
  if (auto e = into(f.number("relative_speed"), d.relativeSpeed))
    return e;
  if (auto e = f.unknownKeys({"name", "kind", "memory_bytes", "relative_speed"}))
    return e;
  std::optional<DeviceKind> parsed = parseDeviceKind(kind);
  if (!parsed)
    return makeError(where + ": kind '" + printable(kind) + "' is not one of cpu, gpu");
  d.kind = *parsed;
  if (!(memory >= 1 && memory < 9.2e18))
    return makeError(where + ": memory_bytes must be a positive byte count");
  d.memoryBytes = (int64_t)memory;
  return d;
}

llvm::Expected<Link> parseLink(const llvm::json::Value &v, unsigned i) {
  std::string where = "links[" + std::to_string(i) + "]";
  const llvm::json::Object *o = v.getAsObject();
  if (!o)
    return makeError(where + " must be an object");
  JsonFields f(*o, where);
  Link l;
  const llvm::json::Array *ends = nullptr;
  if (auto e = into(f.array("endpoints"), ends))
    return e;
  if (ends->size() != 2 || !(*ends)[0].getAsString() || !(*ends)[1].getAsString())
    return makeError(where + ": 'endpoints' must list two device names");
  l.a = (*ends)[0].getAsString()->str();
  l.b = (*ends)[1].getAsString()->str();
  if (auto e = into(f.number("bandwidth"), l.bandwidth))
    return e;
  if (auto e = f.unknownKeys({"endpoints", "bandwidth"}))
    return e;
  return l;
}

llvm::Expected<KindCalibration> parseCalibration(const JsonFields &parent, llvm::StringRef kind) {
  const llvm::json::Object *o = nullptr;
  if (auto e = into(parent.object(kind), o))
    return e;
  JsonFields f(*o, "calibration." + kind.str());
  if (auto e = f.unknownKeys({"launch_seconds", "conv_flops", "gemm_flops", "memory_bytes",
                              "measured", "model", "threads", "cores"}))
    return e;
  KindCalibration k;
  for (auto [key, field] :
       {std::pair<llvm::StringRef, double *>{"launch_seconds", &k.launchSeconds},
        {"conv_flops", &k.convFlops},
        {"gemm_flops", &k.gemmFlops},
        {"memory_bytes", &k.memoryBytes}}) {
    if (auto e = into(f.number(key), *field))
      return e;
    if (!(*field >= 0) || !std::isfinite(*field) || (key != "launch_seconds" && *field == 0))
      return makeError("calibration." + kind + ": '" + key +
                       "' must be a positive number (launch_seconds may be 0)");
  }
  if (o->get("measured"))
    if (auto e = into(f.string("measured"), k.measured))
      return e;
  if (o->get("model"))
    if (auto e = into(f.string("model"), k.model))
      return e;
  if (o->get("threads") || o->get("cores")) {
    if (auto e = into(f.count("threads", kMaxCores + 1), k.threads))
      return e;
    if (auto e = into(f.count("cores", kMaxCores + 1), k.cores))
      return e;
    if (k.threads == 0 || k.cores == 0 || k.threads > k.cores)
      return makeError("calibration." + kind +
                       ": 'threads' and 'cores' (emulated devices) must both be given, with "
                       "1 <= threads <= cores, got threads " +
                       llvm::Twine(k.threads) + " and cores " + llvm::Twine(k.cores));
  }
  return k;
}

llvm::Expected<Cluster> parseCluster(llvm::StringRef text) {
  // The format nests 4 deep: cluster, links, link, endpoints.
  auto root = parseBoundedJson(text, "cluster file", "a cluster description", 4);
  if (!root)
    return root.takeError();
  const llvm::json::Object *o = root->getAsObject();
  if (!o)
    return makeError("cluster file must hold one JSON object");
  JsonFields f(*o, "cluster");
  if (auto e = f.unknownKeys({"devices", "links", "peak_flops", "calibration"}))
    return e;

  const llvm::json::Array *deviceList = nullptr;
  if (auto e = into(f.array("devices"), deviceList))
    return e;
  std::vector<ClusterDevice> devices;
  for (unsigned i = 0; i < deviceList->size(); ++i) {
    auto d = parseDevice((*deviceList)[i], i);
    if (!d)
      return d.takeError();
    devices.push_back(std::move(*d));
  }

  std::vector<Link> links;
  if (o->get("links")) {
    const llvm::json::Array *linkList = nullptr;
    if (auto e = into(f.array("links"), linkList))
      return e;
    for (unsigned i = 0; i < linkList->size(); ++i) {
      auto l = parseLink((*linkList)[i], i);
      if (!l)
        return l.takeError();
      links.push_back(std::move(*l));
    }
  }

  double cpuPeak = ClusterDefaults::kCpuPeakFlops, gpuPeak = ClusterDefaults::kGpuPeakFlops;
  if (const llvm::json::Value *peaks = o->get("peak_flops")) {
    const llvm::json::Object *p = peaks->getAsObject();
    if (!p)
      return makeError("cluster: 'peak_flops' must be an object {\"cpu\": ..., \"gpu\": ...}");
    JsonFields pf(*p, "peak_flops");
    if (auto e = pf.unknownKeys({"cpu", "gpu"}))
      return e;
    if (p->get("cpu"))
      if (auto e = into(pf.number("cpu"), cpuPeak))
        return e;
    if (p->get("gpu"))
      if (auto e = into(pf.number("gpu"), gpuPeak))
        return e;
  }
  auto cluster = Cluster::create(std::move(devices), std::move(links), cpuPeak, gpuPeak);
  if (!cluster)
    return cluster.takeError();
  if (const llvm::json::Value *cal = o->get("calibration")) {
    const llvm::json::Object *c = cal->getAsObject();
    if (!c)
      return makeError("cluster: 'calibration' must be an object {\"cpu\": {...}, \"gpu\": {...}}");
    JsonFields cf(*c, "calibration");
    if (auto e = cf.unknownKeys({"cpu", "gpu"}))
      return e;
    for (DeviceKind t : {DeviceKind::CPU, DeviceKind::GPU}) {
      llvm::StringRef kind = deviceKindName(t);
      if (!c->get(kind))
        continue;
      auto k = parseCalibration(cf, kind);
      if (!k)
        return k.takeError();
      cluster->setCalibration(t, std::move(*k));
    }
  }
  return cluster;
}

} // namespace

llvm::Expected<Cluster> parseClusterJson(llvm::StringRef text) {
  auto c = parseCluster(text);
  if (!c)
    return oneLine(c.takeError());
  return c;
}

llvm::Expected<Cluster> loadClusterFile(llvm::StringRef path) {
  auto buffer = readInputFile(path, "cluster file");
  if (!buffer)
    return buffer.takeError();
  auto c = parseClusterJson((*buffer)->getBuffer());
  if (!c)
    return withContext(c.takeError(), path);
  return c;
}

std::string clusterToJson(const Cluster &c) {
  llvm::json::Array devices, links;
  for (const ClusterDevice &d : c.devices())
    devices.push_back(llvm::json::Object{{"name", d.name},
                                         {"kind", deviceKindName(d.kind)},
                                         {"memory_bytes", d.memoryBytes},
                                         {"relative_speed", d.relativeSpeed}});
  for (const Link &l : c.links())
    links.push_back(
        llvm::json::Object{{"endpoints", llvm::json::Array{l.a, l.b}}, {"bandwidth", l.bandwidth}});
  llvm::json::Object root{
      {"devices", std::move(devices)},
      {"links", std::move(links)},
      {"peak_flops", llvm::json::Object{{"cpu", c.kindPeakFlops(DeviceKind::CPU)},
                                        {"gpu", c.kindPeakFlops(DeviceKind::GPU)}}}};
  llvm::json::Object calibration;
  for (DeviceKind t : {DeviceKind::CPU, DeviceKind::GPU})
    if (const KindCalibration &k = c.calibration(t); k.present())
      calibration[deviceKindName(t)] = llvm::json::Object{{"launch_seconds", k.launchSeconds},
                                                          {"conv_flops", k.convFlops},
                                                          {"gemm_flops", k.gemmFlops},
                                                          {"memory_bytes", k.memoryBytes},
                                                          {"measured", k.measured}};
  for (DeviceKind t : {DeviceKind::CPU, DeviceKind::GPU}) {
    const KindCalibration &k = c.calibration(t);
    if (!k.present())
      continue;
    llvm::json::Object &o = *calibration[deviceKindName(t)].getAsObject();
    if (!k.model.empty())
      o["model"] = k.model;
    if (k.emulated()) {
      o["threads"] = k.threads;
      o["cores"] = k.cores;
    }
  }
  if (!calibration.empty())
    root["calibration"] = std::move(calibration);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)));
  return os.str();
}

std::string calibratedClusterFileName(llvm::StringRef gpuModel) {
  std::string slug;
  for (char ch : gpuModel) {
    if (llvm::isAlnum(ch))
      slug += llvm::toLower(ch);
    else if (!slug.empty() && slug.back() != '-')
      slug += '-';
  }
  while (!slug.empty() && slug.back() == '-')
    slug.pop_back();
  return slug.empty() ? "" : slug + ".json";
}

} // namespace graphc
