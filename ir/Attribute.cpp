#include "ir/Attribute.h"

#include <algorithm>

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

int64_t Attrs::getInt(llvm::StringRef name, int64_t dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  if (auto *d = std::get_if<double>(a))
    return (int64_t)*d;
  return std::get<int64_t>(*a);
}

double Attrs::getFloat(llvm::StringRef name, double dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  if (auto *i = std::get_if<int64_t>(a))
    return (double)*i;
  return std::get<double>(*a);
}

std::string Attrs::getString(llvm::StringRef name, llvm::StringRef dflt) const {
  const Attribute *a = find(name);
  return a ? std::get<std::string>(*a) : dflt.str();
}

DType Attrs::getDType(llvm::StringRef name, DType dflt) const {
  const Attribute *a = find(name);
  return a ? std::get<DType>(*a) : dflt;
}

Ints Attrs::getInts(llvm::StringRef name, const Ints &dflt) const {
  const Attribute *a = find(name);
  return a ? std::get<Ints>(*a) : dflt;
}

Floats Attrs::getFloats(llvm::StringRef name, const Floats &dflt) const {
  const Attribute *a = find(name);
  if (!a)
    return dflt;
  if (auto *ints = std::get_if<Ints>(a))
    return Floats(ints->begin(), ints->end());
  return std::get<Floats>(*a);
}

Strings Attrs::getStrings(llvm::StringRef name) const {
  const Attribute *a = find(name);
  return a ? std::get<Strings>(*a) : Strings{};
}

const Tensor *Attrs::getTensor(llvm::StringRef name) const {
  const Attribute *a = find(name);
  return a ? std::get_if<Tensor>(a) : nullptr;
}

} // namespace graphc
