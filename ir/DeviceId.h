//===- DeviceId.h - A device named by kind and index -------------*- C++ -*-===//
//
// Devices are written "cpu:0", "gpu:3" on command lines, in cluster files and
// in the IR's requested and assigned devices. That grammar is parsed here and
// nowhere else: the tools parse a user's device once (--params gpu:K, a
// cluster file's names) into a DeviceId, passes build their requests from
// DeviceIds (DeviceId::gpu(t).str()), and code that reads a device back from
// the IR asks DeviceId::parse. The IR keeps the text form, which is what its
// printer, parser and module files carry.
//
// The host is cpu:0: the device inputs are fed on, the parameter server of
// `--params cpu`, and the fallback of the placer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <tuple>

namespace graphc {

/// What a device is; "cpu" and "gpu" in device names and files. The kernel
/// registry and the device registry are keyed by it: a kind names no backend
/// (GPU devices are CUDA's today), so generic code that asks for a kind never
/// names one either.
enum class DeviceKind : unsigned char { CPU, GPU };
inline constexpr unsigned kNumDeviceKinds = 2;
llvm::StringRef deviceKindName(DeviceKind k);
std::optional<DeviceKind> parseDeviceKind(llvm::StringRef s);

struct DeviceId {
  DeviceKind kind = DeviceKind::CPU;
  unsigned index = 0;

  static constexpr DeviceId host() { return {DeviceKind::CPU, 0}; }
  static constexpr DeviceId cpu(unsigned k) { return {DeviceKind::CPU, k}; }
  static constexpr DeviceId gpu(unsigned k) { return {DeviceKind::GPU, k}; }
  /// "cpu:N" or "gpu:N" (N decimal, no sign, no spaces); nothing else.
  static std::optional<DeviceId> parse(llvm::StringRef name);

  bool isHost() const { return kind == DeviceKind::CPU && index == 0; }
  bool isGpu() const { return kind == DeviceKind::GPU; }
  /// "gpu:3".
  std::string str() const;

  friend bool operator==(DeviceId a, DeviceId b) { return a.kind == b.kind && a.index == b.index; }
  friend bool operator!=(DeviceId a, DeviceId b) { return !(a == b); }
  /// CPUs before GPUs, then by index.
  friend bool operator<(DeviceId a, DeviceId b) {
    return std::tie(a.kind, a.index) < std::tie(b.kind, b.index);
  }
};

/// The GPU index of a device name, if it names a GPU ("gpu:3" -> 3).
std::optional<unsigned> gpuIndexOf(llvm::StringRef name);

} // namespace graphc
