#include "kernels/Kernel.h"

#include "ir/Diagnostics.h"
#include "ir/NamedChoices.h"

#include "llvm/ADT/StringExtras.h"

#include <mutex>

namespace graphc {

// register<Name>Kernels of every backend this build links (Backends.def).
#define GRAPHC_BACKEND(Name) void register##Name##Kernels(KernelRegistry &r);
#include "Backends.def"

Kernel::~Kernel() = default;

llvm::Error Kernel::runGroup(llvm::ArrayRef<Kernel *> group,
                             llvm::ArrayRef<KernelContext *> contexts) {
  assert(group.size() == contexts.size() && "one context per kernel");
  for (size_t i = 0; i < group.size(); ++i)
    if (auto e = group[i]->run(*contexts[i]))
      return e;
  return llvm::Error::success();
}

namespace {
constexpr NamedChoice<ConvAlgorithm> kConvAlgorithms[] = {{ConvAlgorithm::Auto, "auto"},
                                                          {ConvAlgorithm::Direct, "direct"},
                                                          {ConvAlgorithm::Winograd, "winograd"}};
} // namespace

llvm::Expected<ConvAlgorithm> parseConvAlgorithm(llvm::StringRef s) {
  return parseChoice<ConvAlgorithm>(kConvAlgorithms, s, "convolution algorithm");
}

llvm::StringRef convAlgorithmName(ConvAlgorithm a) {
  return choiceName<ConvAlgorithm>(kConvAlgorithms, a);
}

llvm::StringRef layoutName(Layout l) {
  switch (l) {
  case Layout::Plain:
    return "in the plain layout";
  case Layout::Blocked:
    return "in the blocked layout";
  case Layout::ChannelsLast:
    break;
  }
  return "channels-last";
}

DType kernelDType(const Node &n) {
  if (n.numOperands())
    return n.operand(0)->type().dtype;
  if (n.numResults())
    return n.result()->type().dtype;
  return DType::F32;
}

static constexpr unsigned kKinds = kNumDeviceKinds, kDTypes = 6;

static size_t slot(Op op, DeviceKind kind, DType dtype) {
  return ((size_t)op * kKinds + (size_t)kind) * kDTypes + (size_t)dtype;
}

KernelRegistry &KernelRegistry::global() {
  static KernelRegistry *r = [] {
    auto *reg = new KernelRegistry();
#define GRAPHC_BACKEND(Name) register##Name##Kernels(*reg);
#include "Backends.def"
    return reg;
  }();
  return *r;
}

void KernelRegistry::add(Op op, DeviceKind kind, DType dtype, KernelFactory f) {
  if (table_.empty())
    table_.resize(numOps() * kKinds * kDTypes);
  table_[slot(op, kind, dtype)] = std::move(f);
}

void KernelRegistry::add(Op op, DeviceKind kind, std::initializer_list<DType> dtypes,
                         const KernelFactory &f) {
  for (DType t : dtypes)
    add(op, kind, t, f);
}

const KernelFactory *KernelRegistry::find(Op op, DeviceKind kind, DType dtype) const {
  if (table_.empty())
    return nullptr;
  const KernelFactory &f = table_[slot(op, kind, dtype)];
  return f ? &f : nullptr;
}

bool KernelRegistry::supports(const Node &n, DeviceKind kind) const {
  return find(n.op(), kind, kernelDType(n)) != nullptr;
}

std::vector<DeviceKind> KernelRegistry::kindsFor(const Node &n) const {
  std::vector<DeviceKind> kinds;
  for (DeviceKind k : {DeviceKind::CPU, DeviceKind::GPU})
    if (supports(n, k))
      kinds.push_back(k);
  return kinds;
}

llvm::Expected<std::unique_ptr<Kernel>> KernelRegistry::create(const Node &n,
                                                               const KernelEnv &env) const {
  const KernelFactory *f = find(n.op(), env.kind, kernelDType(n));
  if (!f) {
    std::vector<std::string> kinds;
    for (DeviceKind k : kindsFor(n))
      kinds.push_back(deviceKindName(k).str());
    return nodeError(n, "no " + deviceKindName(env.kind) + " kernel for dtype " +
                            dtypeName(kernelDType(n)) + "; devices that can run it: " +
                            (kinds.empty() ? std::string("none") : llvm::join(kinds, ", ")));
  }
  return (*f)(n, env);
}

} // namespace graphc
