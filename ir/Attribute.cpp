#include "ir/Attribute.h"

#include <algorithm>
#include <cassert>

namespace graphc {

void Attrs::set(llvm::StringRef name, Attribute value) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const Entry &e, llvm::StringRef n) { return e.first < n; });
  if (it != entries_.end() && it->first == name)
    it->second = std::move(value);
  else
    entries_.insert(it, Entry(name.str(), std::move(value)));
}

void Attrs::erase(llvm::StringRef name) {
  llvm::erase_if(entries_, [&](const Entry &e) { return e.first == name; });
}

const Attribute *Attrs::find(llvm::StringRef name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const Entry &e, llvm::StringRef n) { return e.first < n; });
  return it != entries_.end() && it->first == name ? &it->second : nullptr;
}

/// The value of kind T, or null after an assertion when the attribute has
/// another kind (see the header: the verifier rules that out).
template <typename T> static const T *expectKind(const Attribute *a) {
  const T *v = std::get_if<T>(a);
  assert(v && "attribute of another kind than its op's schema says (ir/OpAttrs.def): "
              "verify the module first");
  return v;
}

/// An empty list of any kind, which `[]` in the text form cannot tell apart.
static bool isEmptyList(const Attribute *a) {
  if (auto *v = std::get_if<Ints>(a))
    return v->empty();
  if (auto *v = std::get_if<Floats>(a))
    return v->empty();
  if (auto *v = std::get_if<Strings>(a))
    return v->empty();
  return false;
}

int64_t Attrs::getInt(llvm::StringRef name, int64_t dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  const int64_t *v = expectKind<int64_t>(a);
  return v ? *v : dflt;
}

double Attrs::getFloat(llvm::StringRef name, double dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  if (auto *i = std::get_if<int64_t>(a))
    return (double)*i;
  const double *v = expectKind<double>(a);
  return v ? *v : dflt;
}

std::string Attrs::getString(llvm::StringRef name, llvm::StringRef dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt.str();
  const std::string *v = expectKind<std::string>(a);
  return v ? *v : dflt.str();
}

DType Attrs::getDType(llvm::StringRef name, DType dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  const DType *v = expectKind<DType>(a);
  return v ? *v : dflt;
}

Ints Attrs::getInts(llvm::StringRef name, const Ints &dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  if (isEmptyList(a))
    return Ints{};
  const Ints *v = expectKind<Ints>(a);
  return v ? *v : dflt;
}

Floats Attrs::getFloats(llvm::StringRef name, const Floats &dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  if (auto *ints = std::get_if<Ints>(a))
    return Floats(ints->begin(), ints->end());
  if (isEmptyList(a))
    return Floats{};
  const Floats *v = expectKind<Floats>(a);
  return v ? *v : dflt;
}

Strings Attrs::getStrings(llvm::StringRef name) const {
  const Attribute *a = find(name);
  if (!a || isEmptyList(a))
    return Strings{};
  const Strings *v = expectKind<Strings>(a);
  return v ? *v : Strings{};
}

const Tensor *Attrs::getTensor(llvm::StringRef name) const {
  const Attribute *a = find(name);
  return a ? std::get_if<Tensor>(a) : nullptr;
}

} // namespace graphc
