// Every plain CPU kernel against PyTorch (cases written by reference.py).
#include "ReferenceCases.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {

void expectCases(llvm::StringRef family, int atLeast) {
  int ran = runReferenceCases(family);
  EXPECT_GE(ran, atLeast) << "too few '" << family.str() << "' cases in the reference data";
}

} // namespace

TEST(PlainReference, BinaryArithmeticWithBroadcasting) {
  expectCases("binary/", 60);
}
TEST(PlainReference, UnaryActivationsAndMath) {
  expectCases("unary/", 60);
}
TEST(PlainReference, CastBetweenAllDTypes) {
  expectCases("cast/", 38);
}
TEST(PlainReference, ActivationGradients) {
  expectCases("grad/", 25);
}
TEST(PlainReference, AddN) {
  expectCases("addn/", 7);
}
TEST(PlainReference, LayerNormAndItsGradient) {
  expectCases("layernorm/", 16);
}
TEST(PlainReference, SoftmaxFamily) {
  expectCases("softmax/", 30);
}
TEST(PlainReference, ShapeOps) {
  expectCases("shape/", 60);
}
TEST(PlainReference, GatherAndScatter) {
  expectCases("gather/", 20);
}
TEST(PlainReference, Reductions) {
  expectCases("reduce/", 28);
}
TEST(PlainReference, SoftmaxCrossEntropy) {
  expectCases("loss/", 9);
}
TEST(PlainReference, OptimizersOverSteps) {
  expectCases("optimizer/", 12);
}
