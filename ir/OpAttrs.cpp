//===- OpAttrs.cpp - Checking attributes against OpAttrs.def --------------===//
//
// The table is expanded once into one list per op. Checks are cheap (a few
// string comparisons per attribute), so they run wherever a node's shape
// function runs, which makes them part of every verification.
//
//===----------------------------------------------------------------------===//

#include "ir/OpAttrs.h"

#include "ir/Attribute.h"
#include "ir/AttributeText.h"
#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

namespace graphc {
namespace {

constexpr bool Required = true, Optional = false;

struct Row {
  Op op;
  AttrSpec spec;
};

const Row kRows[] = {
#define GRAPHC_ATTR(O, Name, Kind, Need) {Op::O, {#Name, AttrKind::Kind, Need}},
#include "ir/OpAttrs.def"
};

const AttrSpec kAnyOp[] = {
#define GRAPHC_ANY_ATTR(Name, Kind) {#Name, AttrKind::Kind, Optional},
#include "ir/OpAttrs.def"
};

const AttrSpec kMeta[] = {
#define GRAPHC_META(Name, Kind) {#Name, AttrKind::Kind, Optional},
#include "ir/OpAttrs.def"
};

const std::vector<std::vector<AttrSpec>> &specsByOp() {
  static const std::vector<std::vector<AttrSpec>> byOp = [] {
    std::vector<std::vector<AttrSpec>> v(numOps());
    for (const Row &r : kRows)
      v[(unsigned)r.op].push_back(r.spec);
    return v;
  }();
  return byOp;
}

const AttrSpec *findIn(llvm::ArrayRef<AttrSpec> specs, llvm::StringRef name) {
  for (const AttrSpec &s : specs)
    if (s.name == name)
      return &s;
  return nullptr;
}

bool isEmptyList(const Attribute &a) {
  if (auto *v = std::get_if<Ints>(&a))
    return v->empty();
  if (auto *v = std::get_if<Floats>(&a))
    return v->empty();
  if (auto *v = std::get_if<Strings>(&a))
    return v->empty();
  return false;
}

bool intFits(int64_t v, AttrKind k) {
  switch (k) {
  case AttrKind::Count:
  case AttrKind::Counts:
    return v >= 0;
  case AttrKind::Positive:
  case AttrKind::Positives:
    return v >= 1;
  case AttrKind::Bool:
    return v == 0 || v == 1;
  default:
    return true;
  }
}

bool fits(const Attribute &a, AttrKind k) {
  const int64_t *i = std::get_if<int64_t>(&a);
  const double *d = std::get_if<double>(&a);
  switch (k) {
  case AttrKind::Int:
  case AttrKind::Count:
  case AttrKind::Positive:
  case AttrKind::Bool:
    return i && intFits(*i, k);
  case AttrKind::Float:
    return i || (d && std::isfinite(*d));
  case AttrKind::Bound:
    return i || (d && !std::isnan(*d));
  case AttrKind::String:
    return std::holds_alternative<std::string>(a);
  case AttrKind::DType:
    return std::holds_alternative<DType>(a);
  case AttrKind::Tensor:
    return std::holds_alternative<Tensor>(a);
  case AttrKind::Ints:
  case AttrKind::Counts:
  case AttrKind::Positives:
    if (auto *v = std::get_if<Ints>(&a))
      return llvm::all_of(*v, [&](int64_t x) { return intFits(x, k); });
    return isEmptyList(a);
  case AttrKind::Floats:
    if (auto *v = std::get_if<Floats>(&a))
      return llvm::all_of(*v, [](double x) { return std::isfinite(x); });
    return std::holds_alternative<Ints>(a) || isEmptyList(a);
  case AttrKind::Strings:
    return std::holds_alternative<Strings>(a) || isEmptyList(a);
  }
  llvm_unreachable("unknown attribute kind");
}

/// The value as the text form writes it, cut short for a message.
std::string shortForm(const Attribute &a) {
  if (auto *t = std::get_if<Tensor>(&a))
    return "a tensor " + toString(t->type());
  std::string s;
  llvm::raw_string_ostream os(s);
  printAttribute(a, os);
  return printable(os.str(), 60);
}

template <typename Fail>
llvm::Error wrongKind(Fail fail, llvm::StringRef name, const AttrSpec &spec,
                      const Attribute &value) {
  return fail("attribute '" + name + "' must be " + describeKind(spec.kind) + ", found " +
              shortForm(value));
}

/// Checks `attrs` against `lookup`; a name without a row goes to `unknown`.
template <typename Lookup, typename Fail, typename Unknown>
llvm::Error checkAgainst(const Attrs &attrs, Lookup lookup, Fail fail, Unknown unknown) {
  for (const auto &[name, value] : attrs.entries()) {
    const AttrSpec *spec = lookup(name);
    if (!spec) {
      if (auto e = unknown(name))
        return e;
      continue;
    }
    if (!fits(value, spec->kind))
      return wrongKind(fail, name, *spec, value);
  }
  return llvm::Error::success();
}

/// An op's attribute names for checking a node in one merge with its sorted
/// attributes: every name the op takes (its own rows, then those any op may
/// carry), sorted, once each with the row findAttrSpec would give; and where
/// the name of each of the op's own rows sits in that list.
struct OpNames {
  std::vector<std::pair<llvm::StringRef, const AttrSpec *>> sorted;
  std::vector<unsigned> rowAt;
};

const std::vector<OpNames> &namesByOp() {
  static const std::vector<OpNames> byOp = [] {
    std::vector<OpNames> v(numOps());
    for (unsigned op = 0; op < numOps(); ++op) {
      OpNames &names = v[op];
      auto add = [&](const AttrSpec &s) {
        if (llvm::none_of(names.sorted, [&](const auto &e) { return e.first == s.name; }))
          names.sorted.emplace_back(s.name, &s);
      };
      for (const AttrSpec &s : specsByOp()[op])
        add(s);
      for (const AttrSpec &s : kAnyOp)
        add(s);
      llvm::sort(names.sorted, [](const auto &a, const auto &b) { return a.first < b.first; });
      assert(names.sorted.size() <= 64 && "checkOpAttributes marks names in 64 bits");
      for (const AttrSpec &s : specsByOp()[op])
        names.rowAt.push_back(
            llvm::find_if(names.sorted, [&](const auto &e) { return e.first == s.name; }) -
            names.sorted.begin());
    }
    return v;
  }();
  return byOp;
}

std::string takes(Op op) {
  llvm::ArrayRef<AttrSpec> specs = attrSpecs(op);
  if (specs.empty())
    return (opName(op) + " takes no attributes").str();
  std::vector<llvm::StringRef> names;
  for (const AttrSpec &s : specs)
    names.push_back(s.name);
  return (opName(op) + " takes " + llvm::join(names, ", ")).str();
}

} // namespace

llvm::StringRef describeKind(AttrKind k) {
  switch (k) {
  case AttrKind::Int:
    return "an integer";
  case AttrKind::Count:
    return "a non-negative integer";
  case AttrKind::Positive:
    return "a positive integer";
  case AttrKind::Bool:
    return "0 or 1";
  case AttrKind::Float:
    return "a finite number";
  case AttrKind::Bound:
    return "a number or inf (not nan)";
  case AttrKind::String:
    return "a string";
  case AttrKind::DType:
    return "a dtype such as f32";
  case AttrKind::Ints:
    return "a list of integers";
  case AttrKind::Counts:
    return "a list of non-negative integers";
  case AttrKind::Positives:
    return "a list of positive integers";
  case AttrKind::Floats:
    return "a list of finite numbers";
  case AttrKind::Strings:
    return "a list of strings";
  case AttrKind::Tensor:
    return "a tensor";
  }
  llvm_unreachable("unknown attribute kind");
}

llvm::ArrayRef<AttrSpec> attrSpecs(Op op) {
  return specsByOp()[(unsigned)op];
}

const AttrSpec *findAttrSpec(Op op, llvm::StringRef name) {
  if (const AttrSpec *s = findIn(attrSpecs(op), name))
    return s;
  return findIn(kAnyOp, name);
}

llvm::Error checkOpAttributes(Op op, const Attrs &attrs,
                              llvm::function_ref<llvm::Error(const llvm::Twine &)> fail) {
  // It runs with every shape function, so in every verification: the node's
  // attributes (sorted by name) are merged with the op's sorted names, and
  // the names found are marked for the check of the required ones.
  const OpNames &names = namesByOp()[(unsigned)op];
  uint64_t found = 0;
  size_t j = 0;
  for (const auto &[name, value] : attrs.entries()) {
    while (j < names.sorted.size() && names.sorted[j].first < name)
      ++j;
    if (j == names.sorted.size() || names.sorted[j].first != name)
      return fail("unknown attribute '" + printable(name) + "'; " + takes(op));
    found |= uint64_t(1) << j;
    const AttrSpec &spec = *names.sorted[j].second;
    if (!fits(value, spec.kind))
      return wrongKind(fail, name, spec, value);
  }
  llvm::ArrayRef<AttrSpec> specs = attrSpecs(op);
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].required && !(found >> names.rowAt[i] & 1))
      return fail("needs attribute '" + specs[i].name + "' (" + describeKind(specs[i].kind) + ")");
  return llvm::Error::success();
}

llvm::Error checkModuleMeta(const Attrs &meta) {
  auto fail = [](const llvm::Twine &msg) { return makeError("module meta: " + msg); };
  auto lookup = [](llvm::StringRef name) { return findIn(kMeta, name); };
  auto unknown = [](llvm::StringRef) { return llvm::Error::success(); };
  return checkAgainst(meta, lookup, fail, unknown);
}

} // namespace graphc
