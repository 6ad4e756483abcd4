#include "ir/Parser.h"
#include "ir/AttributeText.h"
#include "ir/Builder.h"
#include "ir/Equivalence.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

std::unique_ptr<Module> sample() {
  auto m = std::make_unique<Module>("sample");
  m->plan().seed = 7;
  m->plan().source = "test \"quoted\"";
  Builder b(m->main());
  Value *x = b.input("x", TensorType(DType::F32, {kBatchDim, 4}));
  Variable w;
  w.name = "fc.weight";
  w.type = TensorType(DType::F32, {3, 4});
  w.init = {"trunc_normal", {0, 0.1, -0.2, 0.2}};
  w.devices = {DeviceId::host()};
  Variable bias;
  bias.name = "fc.bias";
  bias.type = TensorType(DType::F32, {3});
  bias.data = Tensor::fromFloats({3}, {0.5f, -1.25f, 1e-7f});
  Attrs g;
  g.set("transB", int64_t(1));
  g.set("alpha", 1.0);
  Node *gemm;
  {
    Builder::Scope s(b, "fc");
    gemm = b.createNode(Op::Gemm, {x, b.newVariable(w), b.newVariable(bias)}, g, "gemm");
  }
  gemm->setRequestedDevice(DeviceId::gpu(0));
  gemm->setAssignedDevice(DeviceId::gpu(1));
  gemm->setPlacementReason("colocated with \"fc.weight\"");
  gemm->setTower(1);
  Attrs split;
  split.set("axis", int64_t(1));
  split.set("split", Ints{1, 2});
  Node *s = b.createNode(Op::Split, {gemm->result()}, split, "split");
  Value *c = b.constant(Tensor::fromFloats({2}, {1.5f, -2.0f}), "c");
  Value *y = b.create(Op::Add, {s->result(1), c});
  Attrs assign;
  assign.set("var", std::string("fc.bias"));
  Value *z = b.create(Op::Concat, {s->result(0), y}, [] {
    Attrs a;
    a.set("axis", int64_t(1));
    return a;
  }());
  // Lists of strings and floats: no op takes the latter, module meta may.
  m->plan().other.set("labels", Strings{"a", "b c"});
  m->plan().other.set("scales", Floats{0.1, 1e-30});
  m->main().addOutput(z);
  m->main().addOutput(s->result(0));
  return m;
}

std::string parseError(llvm::StringRef text) {
  auto m = parseModule(text, "t.gir");
  if (m)
    return "parsed";
  return llvm::toString(m.takeError());
}

} // namespace

TEST(Parser, RoundTripsPrintedModules) {
  auto m = sample();
  ASSERT_FALSE(bool(verify(*m)));
  std::string text = toText(*m, {.weights = true});
  auto back = parseModule(text);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError()) << "\n" << text;
  std::string why;
  EXPECT_TRUE(structurallyEqual(*m, **back, &why)) << why << "\n" << text;
  EXPECT_EQ(toText(**back, {.weights = true}), text);
  EXPECT_FALSE(bool(verify(**back)));
}

// Sharded optimizer state: the device list ends with `sharded`, and each
// device holds its piece (ir/Shards.h: 3 elements over 2 devices, 1 and 2).
TEST(Parser, ShardedStorageRoundTrips) {
  auto m = sample();
  Variable slot;
  slot.name = "fc.bias/momentum";
  slot.type = TensorType(DType::F32, {3});
  slot.kind = VarKind::Slot;
  slot.devices = {DeviceId::gpu(0), DeviceId::gpu(1)};
  slot.sharded = true;
  m->addVariable(slot);
  std::string text = toText(*m);
  EXPECT_NE(text.find("@ \"gpu:0\", \"gpu:1\" sharded\n"), std::string::npos) << text;
  auto back = parseModule(text);
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  const Variable *v = (*back)->findVariable("fc.bias/momentum");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->sharded);
  EXPECT_FALSE((*back)->findVariable("fc.weight")->sharded);
  EXPECT_EQ(v->bytesOn(DeviceId::gpu(0)), 4);
  EXPECT_EQ(v->bytesOn(DeviceId::gpu(1)), 8);
  EXPECT_EQ(v->bytesOn(DeviceId::host()), 0);
  EXPECT_EQ((*back)->findVariable("fc.weight")->bytesOn(DeviceId::host()), 48);
}

TEST(Parser, ElidedWeightsAreMarked) {
  auto m = sample();
  std::string text = toText(*m);
  EXPECT_NE(text.find("fc.bias : f32[3] param elided"), std::string::npos) << text;
  auto back = parseModule(text);
  ASSERT_TRUE(bool(back));
  EXPECT_EQ((*back)->findVariable("fc.bias")->init.fn, "elided");
}

TEST(Parser, ErrorsGiveLineAndColumn) {
  EXPECT_EQ(parseError("module m {\n  graph main {\n    %x = Input : f32[2]\n    %y = Relu(%z) : "
                       "f32[2]\n    return %y\n  }\n}\n"),
            "t.gir:4:15: use of undefined value '%z'");
  EXPECT_EQ(parseError("module m {\n  graph main {\n    %x = Inptu : f32[2]\n"),
            "t.gir:3:10: unknown op 'Inptu'");
  EXPECT_EQ(parseError("module m {\n  graph main {\n    %x = Input : f32[2\n"),
            "t.gir:4:1: expected ']', found the end of the input");
  std::string typeErr = parseError(
      "module m {\n graph main {\n  %x = Input : f32[2,3]\n  %y = Relu(%x) : f32[3,2]\n  return "
      "%y\n }\n}\n");
  EXPECT_EQ(typeErr.rfind("t.gir:4:3: result '%y' is written f32[3,2]", 0), 0u) << typeErr;
  EXPECT_EQ(parseError("module m {\n  var w : f32[2] parm zeros\n}\n"),
            "t.gir:2:18: expected param, state or slot, found 'parm'");
  EXPECT_EQ(parseError(""), "t.gir:1:1: expected 'module'");
}

TEST(Parser, RefusesADeviceThatIsNotCpuOrGpuN) {
  EXPECT_EQ(parseError("module m {\n graph main {\n  %x = Input : f32[2] device \"gpu1\"\n  "
                       "return %x\n }\n}\n"),
            "t.gir:3:30: expected a device such as \"cpu:0\" or \"gpu:3\", found \"gpu1\"");
  EXPECT_EQ(parseError("module m {\n graph main {\n  %x = Input : f32[2] requested \"\"\n  "
                       "return %x\n }\n}\n"),
            "t.gir:3:33: expected a device such as \"cpu:0\" or \"gpu:3\", found \"\"");
  std::string e =
      parseError("module m {\n  var w : f32[2] param zeros @ \"cpu:0\", \"tpu:0\"\n}\n");
  EXPECT_NE(e.find("found \"tpu:0\""), std::string::npos) << e;
}

TEST(Parser, RejectsDuplicateDefinitions) {
  std::string e = parseError("module m {\n graph main {\n  %x = Input : f32[2]\n  %x = Input : "
                             "f32[2]\n  return %x\n }\n}\n");
  EXPECT_NE(e.find("t.gir:4:3: value '%x' is defined twice"), std::string::npos) << e;
}

TEST(Printer, FloatsReadBackExactly) {
  for (double d : {0.1, 1.0 / 3, 1e-30, -2.5, 100.0, 6.02214076e23})
    EXPECT_EQ(std::strtod(formatDouble(d).c_str(), nullptr), d) << formatDouble(d);
  EXPECT_EQ(formatDouble(1.0), "1.0");
}
