// What the plain kernels promise the executor besides numbers: errors that
// name the node and the bad value, the layouts they accept, operands they may
// overwrite (and that doing so gives the same result), and results that do
// not depend on the thread count.
#include "PlainTestUtil.h"

#include "kernels/cpu/CpuBackend.h"
#include "kernels/cpu/PlainLoops.h"

using namespace graphc;

namespace {

Attrs attrs(std::initializer_list<std::pair<const char *, Attribute>> list) {
  Attrs a;
  for (auto &[k, v] : list)
    a.set(k, v);
  return a;
}

Tensor labels(DType dtype, llvm::ArrayRef<int64_t> values) {
  Tensor t(TensorType(dtype, {(int64_t)values.size()}));
  for (size_t i = 0; i < values.size(); ++i)
    t.set(i, (double)values[i]);
  return t;
}

} // namespace

TEST(PlainContract, LabelOutOfRangeNamesNodeRowAndLabel) {
  for (DType dtype : {DType::I64, DType::I32}) {
    Module m;
    Builder b(m.main());
    Value *x = b.input("logits", TensorType(DType::F32, {4, 5}));
    Value *y = b.input("labels", TensorType(dtype, {4}));
    Node *loss = b.createNode(Op::SoftmaxCrossEntropy, {x, y}, {}, "head/loss");
    Node *grad = b.createNode(Op::SoftmaxCrossEntropyGrad, {x, y, b.scalar(1)}, {}, "head/grad");
    Tensor logits = randomTensor({4, 5}, 1);
    std::string e = runError(*loss, {logits, labels(dtype, {0, 3, 7, 1})});
    EXPECT_NE(e.find("'head/loss'"), std::string::npos) << e;
    EXPECT_NE(e.find("label 7 in row 2"), std::string::npos) << e;
    e = runError(*grad, {logits, labels(dtype, {0, -1, 2, 1}), Tensor::scalar(1)});
    EXPECT_NE(e.find("'head/grad'"), std::string::npos) << e;
    EXPECT_NE(e.find("label -1 in row 1"), std::string::npos) << e;
    EXPECT_EQ(runError(*loss, {logits, labels(dtype, {0, 4, 4, 1})}), "");
  }
}

TEST(PlainContract, GatherIndexOutOfRangeNamesNodeAndIndex) {
  Module m;
  Builder b(m.main());
  Value *data = b.input("table", TensorType(DType::F32, {5, 3}));
  Value *idx = b.input("ids", TensorType(DType::I32, {3}));
  Node *gather = b.createNode(Op::Gather, {data, idx}, {}, "embed/gather");
  Value *dy = b.input("dy", gather->result()->type());
  Node *grad =
      b.createNode(Op::GatherGrad, {idx, dy}, attrs({{"data_shape", Ints{5, 3}}}), "embed/grad");
  Tensor table = randomTensor({5, 3}, 2);
  std::string e = runError(*gather, {table, labels(DType::I32, {0, 5, 1})});
  EXPECT_NE(e.find("'embed/gather'"), std::string::npos) << e;
  EXPECT_NE(e.find("index 5 at position 1"), std::string::npos) << e;
  e = runError(*gather, {table, labels(DType::I32, {-6, 0, 1})});
  EXPECT_NE(e.find("index -6"), std::string::npos) << e;
  e = runError(*grad, {labels(DType::I32, {0, 1, 9}), randomTensor({3, 3}, 3)});
  EXPECT_NE(e.find("'embed/grad'"), std::string::npos) << e;
  EXPECT_NE(e.find("index 9 at position 2"), std::string::npos) << e;
  EXPECT_EQ(runError(*gather, {table, labels(DType::I32, {-5, 4, 0})}), "");
}

TEST(PlainContract, UpdateOpsReportMissingVariables) {
  Module m;
  Variable v;
  v.name = "w";
  v.type = TensorType(DType::F32, {3});
  m.addVariable(v);
  Builder b(m.main());
  Node *sgd = b.createNode(Op::ApplySGD, {b.input("g", v.type), b.scalar(0.1f)},
                           attrs({{"var", std::string("w")}}), "update");
  TensorVariables empty;
  auto out = runNode(*sgd, {randomTensor({3}, 1), Tensor::scalar(0.1f)}, &empty);
  ASSERT_FALSE(bool(out));
  std::string e = llvm::toString(out.takeError());
  EXPECT_NE(e.find("'update'"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
}

TEST(PlainContract, ElementwiseKernelsWorkOnEitherLayoutWhenShapesAgree) {
  Module m;
  Builder b(m.main());
  TensorType t(DType::F32, {2, 16, 3, 3});
  Value *x = b.input("x", t), *y = b.input("y", t);
  Node *add = b.createNode(Op::Add, {x, y});
  Node *bias = b.createNode(Op::Add, {x, b.input("c", TensorType(DType::F32, {16, 1, 1}))});
  Node *relu = b.createNode(Op::Relu, {x});
  Node *grad = b.createNode(Op::ReluGrad, {x, y});
  Node *softmax = b.createNode(Op::Softmax, {x});
  EXPECT_TRUE(kernelFor(*add)->acceptsLayout(1, Layout::Blocked));
  EXPECT_TRUE(kernelFor(*add)->producesLayout(0, Layout::Blocked));
  EXPECT_FALSE(kernelFor(*bias)->acceptsLayout(0, Layout::Blocked)) << "broadcasting";
  EXPECT_TRUE(kernelFor(*relu)->acceptsLayout(0, Layout::Blocked));
  EXPECT_TRUE(kernelFor(*grad)->acceptsLayout(0, Layout::Blocked));
  EXPECT_FALSE(kernelFor(*softmax)->acceptsLayout(0, Layout::Blocked));

  // Blocked views give the same elements (the kernel never looks at the order).
  Tensor a = randomTensor(t.shape, 1), c = randomTensor(t.shape, 2), out(t), want(t);
  TensorView va = viewOf(a), vc = viewOf(c), vo = viewOf(out), vw = viewOf(want);
  ASSERT_FALSE(bool(runOnViews(*add, {va, vc}, {vw})));
  va.layout = vc.layout = vo.layout = Layout::Blocked;
  ASSERT_FALSE(bool(runOnViews(*add, {va, vc}, {vo})));
  EXPECT_EQ(out, want);
  vc.layout = Layout::Plain;
  llvm::Error e = runOnViews(*add, {va, vc}, {vo});
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("layout"), std::string::npos);
}

namespace {

/// A plain [n, c, h, w] f32 tensor stored channels-last ([n, h, w, c]), or back.
Tensor nhwc(const Tensor &t, bool toChannelsLast) {
  Tensor out(t.type());
  auto s = t.shape();
  int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          int64_t plain = ((n * C + c) * H + h) * W + w, last = ((n * H + h) * W + w) * C + c;
          if (toChannelsLast)
            out.data<float>()[last] = t.data<float>()[plain];
          else
            out.data<float>()[plain] = t.data<float>()[last];
        }
  return out;
}

TensorView channelsLastView(Tensor &t) {
  TensorView v = viewOf(t);
  v.layout = Layout::ChannelsLast;
  return v;
}

} // namespace

TEST(PlainContract, ConcatSplitAndElementwiseRunChannelsLastAlongAnyAxis) {
  // Channels-last (--cpu-layout nhwc, bf16 on AMX) fits any channel count:
  // 3 and 5 channels are no whole blocks, and the blocked layout refuses them.
  for (int64_t axis : {0, 1, 2, 3}) {
    SCOPED_TRACE(axis);
    Module m;
    Builder b(m.main());
    Dims sa{2, 3, 4, 5}, sb = sa;
    sb[axis] += 2;
    Value *x = b.input("x", TensorType(DType::F32, sa));
    Value *y = b.input("y", TensorType(DType::F32, sb));
    Node *cat = b.createNode(Op::Concat, {x, y}, attrs({{"axis", axis}}));
    Node *split = b.createNode(Op::Split, {cat->result()},
                               attrs({{"axis", axis}, {"split", Ints{sa[axis], sb[axis]}}}));
    for (Node *n : {cat, split}) {
      auto k = kernelFor(*n);
      ASSERT_TRUE(k);
      EXPECT_TRUE(k->acceptsLayout(0, Layout::ChannelsLast)) << n->name();
      EXPECT_TRUE(k->producesLayout(0, Layout::ChannelsLast)) << n->name();
      EXPECT_FALSE(k->acceptsLayout(0, Layout::Blocked)) << n->name();
    }
    Tensor a = randomTensor(sa, 1), c = randomTensor(sb, 2);
    Tensor joined = mustRun(*cat, {a, c})[0];
    Tensor la = nhwc(a, true), lc = nhwc(c, true), lj(joined.type());
    ASSERT_FALSE(bool(
        runOnViews(*cat, {channelsLastView(la), channelsLastView(lc)}, {channelsLastView(lj)})));
    EXPECT_EQ(nhwc(lj, false), joined);
    Tensor pa(a.type()), pc(c.type());
    ASSERT_FALSE(bool(
        runOnViews(*split, {channelsLastView(lj)}, {channelsLastView(pa), channelsLastView(pc)})));
    EXPECT_EQ(nhwc(pa, false), a);
    EXPECT_EQ(nhwc(pc, false), c);
  }
  Module m;
  Builder b(m.main());
  TensorType t(DType::F32, {2, 3, 4, 5});
  Node *add = b.createNode(Op::Add, {b.input("x", t), b.input("y", t)});
  Node *sum = b.createNode(Op::AddN, {add->operand(0), add->operand(1)});
  for (Node *n : {add, sum}) {
    auto k = kernelFor(*n);
    ASSERT_TRUE(k);
    EXPECT_TRUE(k->acceptsLayout(0, Layout::ChannelsLast)) << n->name();
    EXPECT_FALSE(k->acceptsLayout(0, Layout::Blocked)) << n->name();
  }
}

TEST(PlainContract, InPlaceOperandsGiveTheSameResult) {
  Module m;
  Builder b(m.main());
  TensorType t(DType::F32, {3, 5, 7});
  Value *x = b.input("x", t), *y = b.input("y", t);
  Value *row = b.input("row", TensorType(DType::F32, {7}));
  Value *lbl = b.input("lbl", TensorType(DType::I64, {3}));
  Value *logits = b.input("logits", TensorType(DType::F32, {3, 35}));
  std::vector<Node *> nodes = {
      b.createNode(Op::Add, {x, row}),
      b.createNode(Op::Mul, {row, x}),
      b.createNode(Op::AddN, {x, y, x}),
      b.createNode(Op::Relu, {x}),
      b.createNode(Op::Sigmoid, {x}),
      b.createNode(Op::TanhGrad, {x, y}),
      b.createNode(Op::Softmax, {x}, attrs({{"axis", int64_t(1)}})),
      b.createNode(Op::LogSoftmax, {x}),
      b.createNode(Op::SoftmaxGrad, {x, y}, attrs({{"axis", int64_t(1)}})),
      b.createNode(Op::LogSoftmaxGrad, {x, y}),
      b.createNode(Op::SoftmaxCrossEntropyGrad, {logits, lbl, b.scalar(0.5f)}),
      b.createNode(Op::Reshape, {x}, attrs({{"shape", Ints{15, 7}}})),
      b.createNode(Op::Cast, {x}, attrs({{"to", DType::F32}})),
      b.createNode(Op::Dropout, {x}),
  };
  for (Node *n : nodes) {
    std::unique_ptr<Kernel> k = kernelFor(*n);
    ASSERT_TRUE(k);
    auto slot = k->inPlaceOperand();
    ASSERT_TRUE(slot.has_value()) << n->name();
    std::vector<Tensor> in;
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      const TensorType &ot = n->operand(i)->type();
      if (ot.dtype == DType::I64)
        in.push_back(Tensor::fromInts(ot.shape, {4, 0, 34}));
      else
        in.push_back(randomTensor(ot.shape, 10 + i));
    }
    auto want = mustRun(*n, in);
    ASSERT_EQ(want.size(), 1u);
    // The result written over a copy of the operand it may overwrite.
    Tensor buffer = in[*slot].clone();
    std::vector<TensorView> views;
    for (unsigned i = 0; i < in.size(); ++i)
      views.push_back(viewOf(i == *slot ? buffer : in[i]));
    TensorView out = views[*slot];
    out.shape = want[0].type().shape;
    ASSERT_FALSE(bool(runOnViews(*n, views, {out}))) << n->name();
    EXPECT_EQ(buffer.reshaped(want[0].shape()), want[0]) << n->name();
  }
}

TEST(PlainContract, ReductionsAndLossDoNotDependOnTheThreadCount) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {300001}));
  Value *rows = b.input("rows", TensorType(DType::F32, {40, 3001}));
  Node *all = b.createNode(Op::ReduceSum, {x}, attrs({{"keepdims", int64_t(0)}}));
  Node *cols = b.createNode(Op::ReduceMean, {rows}, attrs({{"axes", Ints{0}}}));
  Value *logits = b.input("logits", TensorType(DType::F32, {3000, 30}));
  Value *lbl = b.input("lbl", TensorType(DType::I64, {3000}));
  Node *loss = b.createNode(Op::SoftmaxCrossEntropy, {logits, lbl});
  Tensor tx = randomTensor({300001}, 1), tr = randomTensor({40, 3001}, 2),
         tl = randomTensor({3000, 30}, 3), tlbl(TensorType(DType::I64, {3000}));
  for (int64_t i = 0; i < 3000; ++i)
    tlbl.data<int64_t>()[i] = (i * 7) % 30;
  int saved = cpuThreads();
  std::vector<Tensor> results[2];
  for (int threads : {1, 2}) {
    setCpuThreads(threads);
    results[threads - 1] = {mustRun(*all, {tx})[0], mustRun(*cols, {tr})[0],
                            mustRun(*loss, {tl, tlbl})[0]};
  }
  setCpuThreads(saved);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(results[0][i], results[1][i]) << "result " << i;
}

TEST(PlainContract, ReduceMeanOfNothingIsNaNAndSumIsZero) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {0, 3}));
  Node *mean = b.createNode(Op::ReduceMean, {x}, attrs({{"axes", Ints{0}}}));
  Node *sum = b.createNode(Op::ReduceSum, {x}, attrs({{"axes", Ints{0}}}));
  Tensor empty(TensorType(DType::F32, {0, 3}));
  Tensor mv = mustRun(*mean, {empty})[0], sv = mustRun(*sum, {empty})[0];
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isnan(mv.at(i)));
    EXPECT_EQ(sv.at(i), 0.0);
  }
}

TEST(PlainContract, InlineBf16RoundingMatchesTheLibrary) {
  // Every 65537th bit pattern (all exponents, both signs) plus ties and specials.
  std::vector<uint32_t> patterns = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u,
                                    0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu};
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 65537)
    patterns.push_back((uint32_t)bits);
  for (uint32_t bits : patterns) {
    float f;
    std::memcpy(&f, &bits, 4);
    ASSERT_EQ(plain::fromFloat<plain::BFloat>(f).bits, floatToBf16Bits(f)) << std::hex << bits;
  }
}
