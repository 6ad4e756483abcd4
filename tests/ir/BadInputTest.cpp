//===- BadInputTest.cpp - Attribute kinds, values and sizes from files ---===//
//
// Every mutation of a valid module that a reader used to pass on to a shape
// function, pass or kernel (std::bad_variant_access, wrapped sizes, garbage
// numbers) is one error naming the node, the attribute and what it must be,
// on one line.
//
//===----------------------------------------------------------------------===//
#include "ir/Archive.h"
#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/Initializers.h"
#include "ir/Npy.h"
#include "ir/OpAttrs.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace graphc;

namespace {

/// A small module that uses the attributes the issue's mutations hit.
const char kValid[] = R"(module t {
  var w : f32[4,8] param zeros
  var b : f32[4] param zeros
  var w.momentum : f32[4,8] slot zeros
  var cw : f32[2,1,3,3] param zeros
  var s : f32[2] param ones
  var bb : f32[2] param zeros
  var mean : f32[2] state zeros
  var rvar : f32[2] state ones
  graph main {
    %x = Input : f32[N,8]
    %lr = Input : f32[]
    %w = Variable {var = "w"} : f32[4,8]
    %b = Variable {var = "b"} : f32[4]
    %y = Gemm(%x, %w, %b) {beta = 1.0, transB = 1} : f32[N,4]
    %d = Dropout(%y) {ratio = 0.5} : f32[N,4]
    %img = Input : f32[N,1,8,8]
    %cw = Variable {var = "cw"} : f32[2,1,3,3]
    %c = Conv(%img, %cw) {group = 1, pads = [1, 1, 1, 1], strides = [2, 2]} : f32[N,2,4,4]
    %s = Variable {var = "s"} : f32[2]
    %bb = Variable {var = "bb"} : f32[2]
    %mean = Variable {var = "mean"} : f32[2]
    %rvar = Variable {var = "rvar"} : f32[2]
    %n = BatchNorm(%c, %s, %bb, %mean, %rvar) {epsilon = 1e-05, momentum = 0.9} : f32[N,2,4,4]
    %p = MaxPool(%n) {kernel_shape = [2, 2], strides = [2, 2]} : f32[N,2,2,2]
    ApplyMomentum(%w, %lr) {momentum = 0.9, slots = ["w.momentum"], var = "w"} name "update"
    return %d, %p
  }
}
)";

/// kValid with `from` replaced by `to` (which must occur once).
std::string mutated(llvm::StringRef from, llvm::StringRef to) {
  std::string text = kValid;
  size_t at = text.find(from.str());
  EXPECT_NE(at, std::string::npos) << from.str();
  EXPECT_EQ(text.find(from.str(), at + 1), std::string::npos) << from.str() << " occurs twice";
  if (at != std::string::npos)
    text.replace(at, from.size(), to.str());
  return text;
}

/// The parse error of `text`, which must be one line.
std::string parseError(const std::string &text) {
  auto m = parseModule(text, "t.gir");
  if (m)
    return "parsed";
  std::string msg = llvm::toString(m.takeError());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  return msg;
}

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

} // namespace

TEST(BadInput, ValidModuleParsesAndVerifies) {
  auto m = parseModule(kValid, "t.gir");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_FALSE(bool(verify(**m)));
}

// The issue's mutations of `graphc print --model mlp` and their like.
TEST(BadInput, AttributeOfTheWrongKindNamesNodeAndAttribute) {
  struct Case {
    const char *from, *to, *expected;
  } cases[] = {
      {"{var = \"b\"}", "{var = f32}",
       "node 'b' (Variable): attribute 'var' must be a string, found f32"},
      {"{var = \"w\"}", "{var = []}",
       "node 'w' (Variable): attribute 'var' must be a string, found []"},
      {"1, 1], strides = [2, 2]}", "1, 1], strides = -1}",
       "node 'c' (Conv): attribute 'strides' must be a list of positive integers, found -1"},
      {"1, 1], strides = [2, 2]}", "1, 1], strides = [2, -1]}",
       "attribute 'strides' must be a list of positive integers, found [2, -1]"},
      {"ratio = 0.5", "ratio = 1e999",
       "node 'd' (Dropout): attribute 'ratio' must be a finite number, found inf"},
      {"ratio = 0.5", "ratio = nan", "attribute 'ratio' must be a finite number, found nan"},
      {"ratio = 0.5", "ratio = [\"a\"]",
       "attribute 'ratio' must be a finite number, found [\"a\"]"},
      {"beta = 1.0", "beta = \"\"",
       "node 'y' (Gemm): attribute 'beta' must be a finite number, found \"\""},
      {"epsilon = 1e-05, momentum = 0.9", "epsilon = 1e-05, momentum = \"str\"",
       "node 'n' (BatchNorm): attribute 'momentum' must be a finite number, found \"str\""},
      {"transB = 1", "transB = 2", "attribute 'transB' must be 0 or 1, found 2"},
      {"transB = 1", "transB = 1.0", "attribute 'transB' must be 0 or 1, found 1.0"},
      {"group = 1", "group = 0", "attribute 'group' must be a positive integer, found 0"},
      {"pads = [1, 1, 1, 1]", "pads = [1, 1, -1, 1]",
       "attribute 'pads' must be a list of non-negative integers, found [1, 1, -1, 1]"},
      {"kernel_shape = [2, 2]", "kernel_shape = [0, 2]",
       "node 'p' (MaxPool): attribute 'kernel_shape' must be a list of positive integers"},
      {"slots = [\"w.momentum\"]", "slots = [1]",
       "node 'update' (ApplyMomentum): attribute 'slots' must be a list of strings, found [1]"},
  };
  for (const Case &c : cases)
    EXPECT_CONTAINS(parseError(mutated(c.from, c.to)), c.expected);
}

TEST(BadInput, UnknownAndMissingAttributes) {
  EXPECT_CONTAINS(parseError(mutated("1, 1], strides = [2, 2]}", "1, 1], strdes = [2, 2]}")),
                  "node 'c' (Conv): unknown attribute 'strdes'; Conv takes strides, pads, "
                  "dilations, group");
  EXPECT_CONTAINS(
      parseError(mutated("%d = Dropout(%y) {ratio = 0.5}", "%d = Relu(%y) {ratio = 0.5}")),
      "unknown attribute 'ratio'; Relu takes no attributes");
  EXPECT_CONTAINS(parseError(mutated("{var = \"w\"}", "{}")),
                  "node 'w' (Variable): needs attribute 'var' (a string)");
  EXPECT_CONTAINS(parseError(mutated("kernel_shape = [2, 2], ", "")),
                  "node 'p' (MaxPool): needs attribute 'kernel_shape'");
  // Annotations any op may carry.
  EXPECT_EQ(parseError(mutated("{ratio = 0.5}", "{colocate_with = \"y\", ratio = 0.5}")), "parsed");
}

TEST(BadInput, AttributeValuesTheShapeFunctionsRefuse) {
  EXPECT_CONTAINS(parseError(mutated("ratio = 0.5", "ratio = 1.5")),
                  "node 'd' (Dropout): attribute 'ratio' is 1.5, outside [0, 1]");
  EXPECT_CONTAINS(parseError(mutated("ratio = 0.5", "ratio = -0.1")), "outside [0, 1]");
  EXPECT_EQ(parseError(mutated("ratio = 0.5", "ratio = 1.0")), "parsed");
  EXPECT_CONTAINS(parseError(mutated("momentum = 0.9}", "momentum = 1.5}")),
                  "attribute 'momentum' is 1.5, outside [0, 1]");
  EXPECT_CONTAINS(parseError(mutated("epsilon = 1e-05", "epsilon = -1.0")),
                  "attribute 'epsilon' is -1.0, outside [0, inf]");
  EXPECT_CONTAINS(parseError(mutated("group = 1", "group = 2")), "with group 2");
  EXPECT_CONTAINS(
      parseError(mutated("1, 1], strides = [2, 2]}", "1, 1], strides = [4294967296, 2]}")),
      "below 2^31");
  // A module file whose optimizer slots were emptied.
  EXPECT_CONTAINS(parseError(mutated("slots = [\"w.momentum\"]", "slots = []")),
                  "node 'update' (ApplyMomentum): needs 1 optimizer slot in 'slots', has 0");
  EXPECT_CONTAINS(parseError(mutated("slots = [\"w.momentum\"], ", "")), "needs attribute 'slots'");
}

// Integers at the ends of int64 in shape arithmetic: refused or computed
// exactly, never wrapped.
TEST(BadInput, ExtremeIntegersDoNotOverflowShapeArithmetic) {
  auto unary = [](const std::string &op) {
    return "module t {\n graph main {\n  %x = Input : f32[4]\n  %y = " + op +
           "\n  return %y\n }\n}\n";
  };
  const std::string max = "9223372036854775807", min = "-9223372036854775808";
  EXPECT_EQ(parseError(unary("Slice(%x) {ends = [" + max + "], starts = [0], steps = [" + max +
                             "]} : f32[1]")),
            "parsed");
  EXPECT_EQ(parseError(unary("Slice(%x) {ends = [" + min + "], starts = [-1], steps = [" + min +
                             "]} : f32[1]")),
            "parsed");
  EXPECT_CONTAINS(parseError(unary("Split(%x) {split = [" + max + ", " + max + "]} : f32[1]")),
                  "split sizes [" + max + "," + max + "] overflow");
  EXPECT_CONTAINS(parseError(unary("Pad(%x) {pads = [" + max + ", 1]} : f32[4]")),
                  "pads [" + max + ",1] overflow");
  EXPECT_CONTAINS(parseError(mutated("group = 1", "group = " + max)), "with group " + max);
}

TEST(BadInput, ModuleMetaKinds) {
  EXPECT_CONTAINS(parseError(mutated("module t {\n", "module t {\n  meta batch = \"x\"\n")),
                  "module meta: attribute 'batch' must be a positive integer, found \"x\"");
  EXPECT_CONTAINS(parseError(mutated("module t {\n", "module t {\n  meta towers = -2\n")),
                  "attribute 'towers' must be a non-negative integer");
  // Keys graphc does not read pass as they are.
  EXPECT_EQ(parseError(mutated("module t {\n", "module t {\n  meta note = [1.5]\n")), "parsed");
}

// The issue's module-file case: a slots list emptied and the checksum made
// to fit (here: written by the writer, which computes it).
TEST(BadInput, ModuleFileWithEmptiedSlots) {
  auto m = parseModule(kValid, "t.gir");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  (*m)->main().findNode("update")->attrs().set("slots", Ints{});
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("slots", "gmod", path));
  ASSERT_FALSE(bool(writeModuleFile(path, **m)));
  auto back = readModuleFile(path);
  llvm::sys::fs::remove(path);
  ASSERT_FALSE(bool(back));
  std::string msg = llvm::toString(back.takeError());
  EXPECT_CONTAINS(msg, "node 'update' (ApplyMomentum): needs 1 optimizer slot in 'slots', has 0");
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// Attributes set by code, not read from text, are held to the same schema.
TEST(BadInput, VerifierChecksNodesBuiltInMemory) {
  Module m("m");
  Graph &g = m.main();
  Builder b(g);
  Value *x = b.input("x", TensorType(DType::F32, {2, 3}));
  Attrs bad;
  bad.set("alpha", std::string("large"));
  g.createNodeWithResultNames(Op::LeakyRelu, {x}, {TensorType(DType::F32, {2, 3})}, {"y"},
                              std::move(bad), "y");
  llvm::Error e = verify(m);
  ASSERT_TRUE(bool(e));
  EXPECT_CONTAINS(llvm::toString(std::move(e)),
                  "node 'y' (LeakyRelu): attribute 'alpha' must be a finite number, found "
                  "\"large\"");
}

TEST(BadInput, SchemaIsWrittenForEveryAttributeOpsRead) {
  const AttrSpec *strides = findAttrSpec(Op::Conv, "strides");
  ASSERT_NE(strides, nullptr);
  EXPECT_EQ(strides->kind, AttrKind::Positives);
  EXPECT_TRUE(findAttrSpec(Op::Variable, "var")->required);
  EXPECT_EQ(findAttrSpec(Op::AllReduce, "group")->kind, AttrKind::String);
  EXPECT_EQ(findAttrSpec(Op::Conv, "group")->kind, AttrKind::Positive);
  EXPECT_NE(findAttrSpec(Op::Relu, "grad_of"), nullptr);
  EXPECT_EQ(findAttrSpec(Op::Relu, "alpha"), nullptr);
}

#ifdef NDEBUG
// In a release build a getter asked for another kind than the attribute has
// gives the default (a debug build asserts): never std::bad_variant_access.
TEST(BadInput, GettersNeverThrow) {
  Attrs a;
  a.set("s", std::string("x"));
  a.set("i", int64_t(3));
  EXPECT_EQ(a.getInt("s", 7), 7);
  EXPECT_EQ(a.getFloat("s", 1.5), 1.5);
  EXPECT_EQ(a.getString("i", "d"), "d");
  EXPECT_EQ(a.getDType("i", DType::I64), DType::I64);
  EXPECT_EQ(a.getInts("i", {1}), Ints{1});
  EXPECT_TRUE(a.getStrings("i").empty());
  EXPECT_EQ(a.getFloat("i"), 3.0);
}
#endif

TEST(BadInput, EmptyListReadsAsAnyList) {
  Attrs a;
  a.set("l", Ints{});
  EXPECT_TRUE(a.getStrings("l").empty());
  EXPECT_TRUE(a.getFloats("l").empty());
  a.set("l", Strings{});
  EXPECT_TRUE(a.getInts("l", {5}).empty());
}

TEST(BadInput, DeclaredSizesAreBoundedBeforeAllocation) {
  // 2^62 x 4 floats wrapped to 0 parameters before.
  EXPECT_CONTAINS(parseError(mutated("var w : f32[4,8]", "var w : f32[4611686018427387904,4]")),
                  "t.gir:2:11: the type f32[4611686018427387904,4] is larger than the 1 TiB a "
                  "tensor may take");
  EXPECT_CONTAINS(parseError(mutated("var w : f32[4,8]", "var w : f32[4294967296,4294967296]")),
                  "larger than the 1 TiB");
  // A literal declaring more values than the file holds is refused before
  // its tensor is allocated.
  EXPECT_CONTAINS(parseError(mutated("%x = Input : f32[N,8]",
                                     "%k = Constant {value = tensor<f32[100000000000]> [1.0]} : "
                                     "f32[100000000000]\n    %x = Input : f32[N,8]")),
                  "more than the rest of the file holds");
  EXPECT_CONTAINS(
      parseError(mutated("var b : f32[4] param zeros", "var b : f32[4] param data \"00\"")),
      "expected 16 bytes of hex data for f32[4], found 1");
  // Reshape to a shape whose element count wraps.
  std::string reshape = "module t {\n graph main {\n  %x = Input : f32[4]\n  %y = Reshape(%x) "
                        "{shape = [4611686018427387905, 4]} : f32[4]\n  return %y\n }\n}\n";
  EXPECT_CONTAINS(parseError(reshape), "node 'y' (Reshape)");
}

TEST(BadInput, MessagesQuotingFileBytesStayOnOneLine) {
  std::string text = "module t {\n graph main {\n  %\"a\\nb\" = Relu(%\"c\\nd\\x1b[31m\") : "
                     "f32[2]\n  return %\"a\\nb\"\n }\n}\n";
  std::string msg = parseError(text);
  EXPECT_CONTAINS(msg, "use of undefined value '%c\\nd\\x1B[31m'");
  EXPECT_EQ(printable("tab\there\n", 80), "tab\\x09here\\n");
  EXPECT_EQ(printable(std::string(100, 'x'), 10), "xxxxxxxxxx...");
  EXPECT_EQ(llvm::toString(oneLine(makeError("a\nb\x01"))), "a\\nb\\x01");
}

TEST(BadInput, NpyShapeOverflowAndOddHeaderBytes) {
  auto npy = [](llvm::StringRef header, llvm::StringRef data = "") {
    std::string h = header.str();
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h.push_back('\n');
    std::string out("\x93NUMPY\x01\x00", 8);
    out.push_back((char)(h.size() & 0xff));
    out.push_back((char)(h.size() >> 8));
    return out + h + data.str();
  };
  auto wrapped = parseNpy(
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"));
  ASSERT_FALSE(bool(wrapped));
  EXPECT_CONTAINS(llvm::toString(wrapped.takeError()), "larger than the 1 TiB");
  auto odd = parseNpy(npy("{'descr': '<f4\n\x1b', 'fortran_order': False, 'shape': (2,), }"));
  ASSERT_FALSE(bool(odd));
  std::string msg = llvm::toString(odd.takeError());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_CONTAINS(msg, "unsupported dtype '<f4\\n\\x1B'");
}

// Issue 28: an initializer that can only give NaN (or never stops drawing) is
// refused where it is read, naming the variable, the call and the place.
TEST(BadInput, InitializersThatCannotGiveFiniteValues) {
  struct Case {
    const char *init, *expected;
  } cases[] = {
      {"constant(nan)", "t.gir:2:26: variable 'w': initializer constant(nan): its arguments must "
                        "be finite numbers"},
      {"uniform(nan, 1)", "initializer uniform(nan, 1.0): its arguments must be finite numbers"},
      {"normal(0, inf)", "initializer normal(0.0, inf): its arguments must be finite numbers"},
      {"normal(0, -1)", "the standard deviation must not be negative"},
      {"uniform(1, -1)", "the lower bound must not exceed the upper"},
      {"kaiming_normal(1.4, 2)", "the mode must be 0 (fan_in) or 1 (fan_out)"},
      {"trunc_normal(0, 1, 40, 41)",
       "[lo, hi] keeps 0% of the draws; at least 1% must fall inside"},
      {"trunc_normal(0, 0, 1, 2)", "[lo, hi] keeps 0% of the draws"},
      {"trunc_normal(0, 1, 2, -2)", "the lower bound must not exceed the upper"},
      {"constant(1, 2)", "initializer constant takes 1 arguments, not 2"},
  };
  for (const Case &c : cases)
    EXPECT_CONTAINS(parseError(mutated("var w : f32[4,8] param zeros",
                                       std::string("var w : f32[4,8] param ") + c.init)),
                    c.expected);
  // Within the rules: a narrow but reachable interval, and a dump's elided data.
  EXPECT_EQ(parseError(mutated("param zeros\n  var b", "param trunc_normal(0, 1, 1, 3)\n  var b")),
            "parsed");
  EXPECT_EQ(parseError(mutated("param zeros\n  var b", "param elided\n  var b")), "parsed");

  // The verifier holds modules built in memory to the same rules.
  auto m = parseModule(kValid, "t.gir");
  ASSERT_TRUE(bool(m));
  (*m)->findVariable("b")->init = Initializer{"constant", {std::nan("")}};
  EXPECT_EQ(llvm::toString(verify(**m)),
            "variable 'b': initializer constant(nan): its arguments must be finite numbers");
  // Finite arguments whose values overflow the dtype are refused when drawn.
  (*m)->findVariable("b")->init = Initializer{"constant", {1e39}};
  EXPECT_FALSE(bool(verify(**m)));
  auto value = initialValue(*(*m)->findVariable("b"), 0);
  ASSERT_FALSE(bool(value));
  EXPECT_EQ(llvm::toString(value.takeError()),
            "variable 'b': initializer constant(1e+39) gives values that are not finite in f32");
}
