//===- DeviceId.h - A device named by kind and index -------------*- C++ -*-===//
//
// Devices are written "cpu:0", "gpu:3" on command lines, in cluster files and
// in the IR's text. That grammar is parsed here and read only at the edges:
// the IR parser (requested, assigned and storage devices; a bad one is an
// error naming its line and column), cluster files, and flags such as
// --params gpu:K. Everything past the edge holds DeviceIds: a Node's
// requested and assigned devices are std::optional<DeviceId> (none: not
// requested, not placed) and a Variable's storage devices are DeviceIds
// (ir/Module.h); the printer and the module files write DeviceId::str(), so
// the text is what it was. Code that asks for a device's kind or GPU index
// reads the fields, never the text.
//
// The host is cpu:0: the device inputs are fed on, the parameter server of
// `--params cpu`, and the fallback of the placer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <iosfwd>
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

/// "gpu:3", for test expectations and logs.
std::ostream &operator<<(std::ostream &os, DeviceId d);
/// d->str(), or "" for none: the text views and messages show.
std::string deviceText(std::optional<DeviceId> d);
/// "gpu:0, gpu:1", for messages.
std::string joinDevices(llvm::ArrayRef<DeviceId> devices);

} // namespace graphc
