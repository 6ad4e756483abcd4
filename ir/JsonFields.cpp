#include "ir/JsonFields.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

namespace graphc {

llvm::Expected<const llvm::json::Value *> JsonFields::get(llvm::StringRef key) const {
  if (const llvm::json::Value *v = o_.get(key))
    return v;
  return makeError(where_ + ": missing field '" + key + "'");
}

llvm::Error JsonFields::wrongType(llvm::StringRef key, llvm::StringRef expected) const {
  return makeError(where_ + ": field '" + key + "' must be " + expected);
}

llvm::Expected<std::string> JsonFields::string(llvm::StringRef key) const {
  auto v = get(key);
  if (!v)
    return v.takeError();
  if (auto s = (*v)->getAsString())
    return s->str();
  return wrongType(key, "a string");
}

llvm::Expected<double> JsonFields::number(llvm::StringRef key) const {
  auto v = get(key);
  if (!v)
    return v.takeError();
  if (auto d = (*v)->getAsNumber())
    return *d;
  return wrongType(key, "a number");
}

llvm::Expected<unsigned> JsonFields::count(llvm::StringRef key, unsigned limit) const {
  auto d = number(key);
  if (!d)
    return d.takeError();
  if (!(*d >= 0 && *d < limit) || std::floor(*d) != *d)
    return wrongType(key, "a whole number from 0 to " + std::to_string(limit - 1));
  return (unsigned)*d;
}

llvm::Expected<const llvm::json::Array *> JsonFields::array(llvm::StringRef key) const {
  auto v = get(key);
  if (!v)
    return v.takeError();
  if (auto *a = (*v)->getAsArray())
    return a;
  return wrongType(key, "an array");
}

llvm::Expected<const llvm::json::Object *> JsonFields::object(llvm::StringRef key) const {
  auto v = get(key);
  if (!v)
    return v.takeError();
  if (auto *o = (*v)->getAsObject())
    return o;
  return wrongType(key, "an object");
}

llvm::Error JsonFields::unknownKeys(llvm::ArrayRef<llvm::StringRef> known) const {
  std::vector<std::string> keys;
  for (const auto &kv : o_)
    keys.push_back(kv.first.str());
  llvm::sort(keys); // the object's own order is a hash order
  for (const std::string &k : keys)
    if (!llvm::is_contained(known, k))
      return makeError(where_ + ": unknown field '" + printable(k) +
                       "' (known: " + llvm::join(known, ", ") + ")");
  return llvm::Error::success();
}

namespace {

/// The deepest nesting of arrays and objects in JSON text (outside strings).
size_t jsonDepth(llvm::StringRef text) {
  size_t depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    }
  }
  return deepest;
}

} // namespace

llvm::Expected<llvm::json::Value> parseBoundedJson(llvm::StringRef text, llvm::StringRef what,
                                                   llvm::StringRef format, size_t formatDepth) {
  if (size_t depth = jsonDepth(text); depth > kMaxJsonDepth)
    return makeError(what + " nests arrays and objects " + llvm::Twine(depth) + " deep; " + format +
                     " needs " + llvm::Twine(formatDepth) + " (at most " +
                     llvm::Twine(kMaxJsonDepth) + " are read)");
  auto root = llvm::json::parse(text);
  if (!root)
    return makeError(what + " is not valid JSON: " + llvm::toString(root.takeError()));
  return root;
}

} // namespace graphc
