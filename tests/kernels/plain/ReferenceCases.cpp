#include "ReferenceCases.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/Npy.h"
#include "kernels/KernelRunner.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <gtest/gtest.h>

namespace graphc {
namespace {

namespace json = llvm::json;

const char *kDir = PLAIN_REFERENCE_DIR;

const json::Array *loadCases() {
  static json::Value root = [] {
    std::string path = std::string(kDir) + "/cases.json";
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return json::Value(nullptr);
    auto parsed = json::parse((*buffer)->getBuffer());
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
      return json::Value(nullptr);
    }
    return std::move(*parsed);
  }();
  return root.getAsArray();
}

llvm::Expected<Attribute> parseAttribute(const json::Object &o) {
  if (auto v = o.getInteger("i"))
    return Attribute(*v);
  if (auto v = o.getNumber("f"))
    return Attribute(*v);
  if (auto v = o.getString("s"))
    return Attribute(v->str());
  if (auto v = o.getString("dtype")) {
    if (auto t = parseDType(*v))
      return Attribute(*t);
    return makeError("unknown dtype " + *v);
  }
  if (const json::Array *a = o.getArray("ints")) {
    Ints ints;
    for (const json::Value &e : *a)
      ints.push_back(*e.getAsInteger());
    return Attribute(ints);
  }
  if (const json::Array *a = o.getArray("floats")) {
    Floats floats;
    for (const json::Value &e : *a)
      floats.push_back(*e.getAsNumber());
    return Attribute(floats);
  }
  if (const json::Array *a = o.getArray("strs")) {
    Strings strs;
    for (const json::Value &e : *a)
      strs.push_back(e.getAsString()->str());
    return Attribute(strs);
  }
  return makeError("unknown attribute kind");
}

llvm::Expected<Tensor> readFile(llvm::StringRef file) {
  return readNpy((llvm::Twine(kDir) + "/" + file).str());
}

/// An input entry: {"file": f} or {"file": f, "as": "bf16"}.
llvm::Expected<Tensor> readEntry(const json::Value &v) {
  const json::Object *o = v.getAsObject();
  auto t = readFile(*o->getString("file"));
  if (!t)
    return t.takeError();
  auto as = o->getString("as");
  if (!as)
    return t;
  Tensor converted(TensorType(*parseDType(*as), t->shape()));
  for (int64_t i = 0; i < t->numElements(); ++i)
    converted.set(i, t->at(i));
  return converted;
}

/// Runs one case; returns "" or what went wrong.
std::string runCase(const json::Object &c) {
  std::string name = c.getString("name")->str();
  auto op = parseOp(*c.getString("op"));
  if (!op)
    return "unknown op";
  double rtol = *c.getNumber("rtol"), atol = *c.getNumber("atol");
  Attrs attrs;
  for (const auto &kv : *c.getObject("attrs")) {
    auto a = parseAttribute(*kv.second.getAsObject());
    if (!a)
      return llvm::toString(a.takeError());
    attrs.set(kv.first.str(), *a);
  }

  Module m;
  TensorVariables vars;
  // Variables with a file first, so an empty slot can take the var's type.
  const json::Object &variables = *c.getObject("variables");
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto &kv : variables) {
      bool hasFile = kv.second.getAsString().hasValue();
      if (hasFile != (pass == 0))
        continue;
      Tensor value;
      if (hasFile) {
        auto t = readFile(*kv.second.getAsString());
        if (!t)
          return llvm::toString(t.takeError());
        value = *t;
      } else {
        value = Tensor(m.findVariable(attrs.getString("var"))->type);
      }
      Variable v;
      v.name = kv.first.str();
      v.type = value.type();
      v.kind = pass == 0 ? VarKind::Param : VarKind::Slot;
      m.addVariable(v);
      vars.tensors[v.name] = value.clone();
    }
  }

  const json::Array &steps = *c.getArray("steps");
  std::vector<std::vector<Tensor>> inputs;
  for (const json::Value &step : steps) {
    inputs.emplace_back();
    for (const json::Value &e : *step.getAsObject()->getArray("inputs")) {
      auto t = readEntry(e);
      if (!t)
        return llvm::toString(t.takeError());
      inputs.back().push_back(*t);
    }
  }
  Builder b(m.main());
  std::vector<Value *> operands;
  for (size_t i = 0; i < inputs[0].size(); ++i)
    operands.push_back(b.input("in" + std::to_string(i), inputs[0][i].type()));
  auto node = b.tryCreate(*op, operands, attrs, "node");
  if (!node)
    return llvm::toString(node.takeError());

  for (size_t s = 0; s < steps.size(); ++s) {
    const json::Object &step = *steps[s].getAsObject();
    std::string where = steps.size() > 1 ? "step " + std::to_string(s) + ": " : "";
    auto out = runNode(**node, inputs[s], &vars, s);
    if (!out)
      return where + llvm::toString(out.takeError());
    const json::Array &expected = *step.getArray("outputs");
    if (expected.size() != out->size())
      return where + "expected " + std::to_string(expected.size()) + " results, got " +
             std::to_string(out->size());
    for (size_t i = 0; i < expected.size(); ++i) {
      auto want = readEntry(expected[i]);
      if (!want)
        return llvm::toString(want.takeError());
      std::string why;
      if (!closeTo((*out)[i], *want, rtol, atol, why))
        return where + "result " + std::to_string(i) + ": " + why;
    }
    if (const json::Object *expectVars = step.getObject("vars")) {
      for (const auto &kv : *expectVars) {
        auto want = readFile(*kv.second.getAsString());
        if (!want)
          return llvm::toString(want.takeError());
        std::string why;
        if (!closeTo(vars.tensors[kv.first], *want, rtol, atol, why))
          return where + "variable '" + kv.first.str() + "': " + why;
      }
    }
  }
  return "";
}

} // namespace

bool closeTo(const Tensor &got, const Tensor &want, double rtol, double atol, std::string &why) {
  if (got.shape() != want.shape()) {
    why = "shape " + toString(got.type()) + ", expected " + toString(want.type());
    return false;
  }
  int bad = 0;
  std::string detail;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    double g = got.at(i), w = want.at(i);
    bool ok = (std::isnan(g) && std::isnan(w)) || std::abs(g - w) <= atol + rtol * std::abs(w);
    if (ok)
      continue;
    if (bad++ < 3) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " [%lld] got %.9g want %.9g;", (long long)i, g, w);
      detail += buf;
    }
  }
  if (!bad)
    return true;
  why = std::to_string(bad) + " of " + std::to_string(got.numElements()) +
        " elements differ:" + detail;
  return false;
}

int runReferenceCases(llvm::StringRef prefix) {
  const json::Array *cases = loadCases();
  if (!cases) {
    ADD_FAILURE() << "no reference cases in " << kDir
                  << "; run the tests through ctest (fixture kernels_plain_reference) or "
                     "/usr/bin/python3 tests/kernels/plain/reference.py "
                  << kDir;
    return 0;
  }
  int count = 0;
  for (const json::Value &v : *cases) {
    const json::Object &c = *v.getAsObject();
    if (!c.getString("name")->startswith(prefix))
      continue;
    ++count;
    std::string failure = runCase(c);
    EXPECT_EQ(failure, "") << "case " << c.getString("name")->str() << " ("
                           << c.getString("op")->str() << ")";
  }
  return count;
}

} // namespace graphc
