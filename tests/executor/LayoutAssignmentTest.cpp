//===- LayoutAssignmentTest.cpp - Each device kind its own layout ---------===//
//
// executor/LayoutAssignment.h on small hand-made graphs whose kernels
// declare their layouts (DeclaredLayoutKernel): CPU devices choose Blocked,
// or channels-last where their policy says (bf16 with AMX, or forced), GPU
// devices channels-last and never Blocked, each switch acts on its own kind
// only, and the contract's rules: graph outputs,
// consumers on other devices and copies between kinds stay plain, copies
// within a kind and layout-following kernels tie their values, and the
// convolutions' vote.
//
//===----------------------------------------------------------------------===//

#include "executor/LayoutAssignment.h"
#include "ir/Builder.h"
#include "kernels/LayoutAnswers.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>

namespace graphc {
namespace {

constexpr Layout kPlain = Layout::Plain, kBlocked = Layout::Blocked, kCL = Layout::ChannelsLast;

/// A graph whose nodes run on named devices with declared kernels.
class Plan {
public:
  Plan() : builder_(module_.main()) {}

  Value *input(const std::string &name, const std::string &device, DType dtype = DType::F16) {
    Value *v = builder_.input(name, TensorType(dtype, {2, 8, 4, 4}));
    place(v->producer(), device, nullptr);
    return v;
  }
  /// A node whose every tensor may take both non-plain layouts, preferring
  /// `prefer` (a convolution) or nothing, following its operands or not.
  Value *node(Op op, llvm::ArrayRef<Value *> operands, const std::string &device,
              bool follows = false, std::optional<Layout> prefer = std::nullopt) {
    Node *n = builder_.createNode(op, operands, {}, fresh("n"));
    LayoutAnswers a = LayoutAnswers::plainOnly(*n);
    for (unsigned i = 0; i < n->numOperands(); ++i) {
      a.allowOperand(i, kBlocked);
      a.allowOperand(i, kCL);
      a.preferOperands[i] = prefer;
    }
    a.allowResult(0, kBlocked);
    a.allowResult(0, kCL);
    a.preferResults[0] = prefer;
    a.follows = follows;
    place(n, device, std::make_unique<DeclaredLayoutKernel>(a));
    return n->result();
  }
  /// A node that takes and gives plain only.
  Value *plainNode(Op op, llvm::ArrayRef<Value *> operands, const std::string &device) {
    Node *n = builder_.createNode(op, operands, {}, fresh("p"));
    place(n, device, std::make_unique<DeclaredLayoutKernel>(LayoutAnswers::plainOnly(*n)));
    return n->result();
  }
  Value *transfer(Value *v, const std::string &device) {
    Attrs a;
    a.set("to", device);
    Node *n = builder_.createNode(Op::Transfer, {v}, a, fresh("t"));
    place(n, device, nullptr);
    return n->result();
  }
  void output(Value *v) { module_.main().addOutput(v); }

  std::map<const Value *, Layout> assign(LayoutOptions o = {}) {
    std::vector<LayoutSite> sites;
    for (const Node *n : module_.main().nodes()) {
      LayoutSite s;
      s.node = n;
      s.device = deviceIndex(device_[n]);
      s.kind = device_[n].rfind("gpu", 0) == 0 ? DeviceKind::GPU : DeviceKind::CPU;
      s.kernel = kernels_.count(n) ? kernels_[n].get() : nullptr;
      if (n->op() == Op::Transfer) {
        const std::string &from = device_[n->operand(0)->producer()];
        s.copiesAsIs = from.substr(0, 3) == device_[n].substr(0, 3);
      }
      sites.push_back(s);
    }
    auto map = assignLayouts(sites, o);
    return std::map<const Value *, Layout>(map.begin(), map.end());
  }

private:
  std::string fresh(const char *prefix) {
    return (llvm::Twine(prefix) + llvm::Twine(++names_)).str();
  }
  void place(Node *n, const std::string &device, std::unique_ptr<Kernel> k) {
    device_[n] = device;
    if (k)
      kernels_[n] = std::move(k);
  }
  unsigned deviceIndex(const std::string &d) {
    auto it = indices_.try_emplace(d, (unsigned)indices_.size()).first;
    return it->second;
  }

  Module module_;
  Builder builder_;
  std::map<const Node *, std::string> device_;
  std::map<const Node *, std::unique_ptr<Kernel>> kernels_;
  std::map<std::string, unsigned> indices_;
  unsigned names_ = 0;
};

Layout layoutOf(const std::map<const Value *, Layout> &m, const Value *v) {
  auto it = m.find(v);
  return it == m.end() ? kPlain : it->second;
}

TEST(LayoutAssignment, EachDeviceKindTakesItsOwnLayoutOnly) {
  for (const char *device : {"cpu:0", "gpu:0"}) {
    Plan p;
    Value *x = p.input("x", device);
    Value *a = p.node(Op::Relu, {x}, device);
    Value *b = p.node(Op::Relu, {a}, device);
    p.output(p.plainNode(Op::Relu, {b}, device));
    const bool gpu = device[0] == 'g';
    for (bool blocked : {true, false})
      for (GpuLayout policy : {GpuLayout::Nchw, GpuLayout::Nhwc, GpuLayout::Auto}) {
        LayoutOptions o;
        o.blocked = blocked;
        o.gpu = policy;
        auto m = p.assign(o);
        Layout want = gpu ? (channelsLastFor(policy, DType::F16) ? kCL : kPlain)
                          : (blocked ? kBlocked : kPlain);
        EXPECT_EQ(layoutOf(m, a), want)
            << device << " blocked " << blocked << " gpu " << gpuLayoutName(policy).str();
        EXPECT_EQ(layoutOf(m, x), kPlain) << "an input has no kernel";
        EXPECT_EQ(layoutOf(m, b), kPlain) << "read by a plain-only kernel";
      }
  }
}

TEST(LayoutAssignment, CpuValuesAreChannelsLastWhereTheCpuPolicySays) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (const char *device : {"cpu:0", "gpu:0"}) {
      Plan p;
      Value *x = p.input("x", device, dtype);
      Value *a = p.node(Op::Relu, {x}, device);
      p.output(p.plainNode(Op::Relu, {p.node(Op::Relu, {a}, device)}, device));
      for (CpuLayout policy : {CpuLayout::Blocked, CpuLayout::Nhwc, CpuLayout::Auto})
        for (bool amx : {false, true}) {
          LayoutOptions o;
          o.cpu = policy;
          o.cpuHasAmx = amx;
          o.gpu = GpuLayout::Nhwc;
          Layout want = device[0] == 'g'                        ? kCL
                        : channelsLastOnCpu(policy, dtype, amx) ? kCL
                                                                : kBlocked;
          EXPECT_EQ(layoutOf(p.assign(o), a), want)
              << device << " " << dtypeName(dtype).str() << " cpu " << cpuLayoutName(policy).str()
              << " amx " << amx;
        }
    }
  // The policy itself: bf16 on AMX by default, f32 and bf16 when forced.
  EXPECT_TRUE(channelsLastOnCpu(CpuLayout::Auto, DType::BF16, true));
  EXPECT_FALSE(channelsLastOnCpu(CpuLayout::Auto, DType::BF16, false));
  EXPECT_FALSE(channelsLastOnCpu(CpuLayout::Auto, DType::F32, true));
  EXPECT_TRUE(channelsLastOnCpu(CpuLayout::Nhwc, DType::F32, false));
  EXPECT_FALSE(channelsLastOnCpu(CpuLayout::Blocked, DType::BF16, true));
  EXPECT_FALSE(channelsLastOnCpu(CpuLayout::Nhwc, DType::I64, false));
}

TEST(LayoutAssignment, CopiesWithinAKindCarryTheLayoutAndAcrossKindsDoNot) {
  Plan p;
  Value *x = p.input("x", "gpu:0");
  Value *a = p.node(Op::Relu, {x}, "gpu:0");
  Value *peer = p.transfer(a, "gpu:1");
  Value *b = p.node(Op::Relu, {peer}, "gpu:1");
  Value *host = p.transfer(b, "cpu:0");
  Value *c = p.node(Op::Relu, {host}, "cpu:0");
  p.output(p.plainNode(Op::Relu, {c}, "cpu:0"));
  p.output(p.plainNode(Op::Relu, {a}, "gpu:0")); // a read again on gpu:0 itself
  auto m = p.assign();
  EXPECT_EQ(layoutOf(m, a), kPlain) << "its plain-only reader ties the copy's group down";
  EXPECT_EQ(layoutOf(m, peer), kPlain);
  EXPECT_EQ(layoutOf(m, b), kPlain) << "b goes to the host";
  EXPECT_EQ(layoutOf(m, host), kPlain) << "copies between kinds are plain";

  Plan q;
  Value *y = q.input("y", "gpu:0");
  Value *d = q.node(Op::Relu, {y}, "gpu:0");
  Value *moved = q.transfer(d, "gpu:1");
  Value *e = q.node(Op::Relu, {moved}, "gpu:1");
  q.output(q.plainNode(Op::Relu, {e}, "gpu:1"));
  auto n = q.assign();
  EXPECT_EQ(layoutOf(n, d), kCL);
  EXPECT_EQ(layoutOf(n, moved), kCL) << "a peer copy moves the NHWC bytes as they are";
}

TEST(LayoutAssignment, OutputsOtherDevicesAndFollowersKeepValuesPlain) {
  Plan p;
  Value *x = p.input("x", "gpu:0");
  Value *out = p.node(Op::Relu, {x}, "gpu:0");
  p.output(out);
  Value *shared = p.node(Op::Relu, {x}, "gpu:0");
  p.output(p.plainNode(Op::Relu, {p.node(Op::Relu, {shared}, "gpu:1")}, "gpu:1"));
  // A follower ties a and b: b's plain-only reader keeps both plain.
  Value *a = p.node(Op::Relu, {x}, "gpu:0");
  Value *b = p.node(Op::Relu, {a}, "gpu:0", /*follows=*/true);
  p.output(p.plainNode(Op::Relu, {b}, "gpu:0"));
  auto m = p.assign();
  EXPECT_EQ(layoutOf(m, out), kPlain) << "a graph output";
  EXPECT_EQ(layoutOf(m, shared), kPlain) << "read on another device";
  EXPECT_EQ(layoutOf(m, a), kPlain) << "tied to b";
  EXPECT_EQ(layoutOf(m, b), kPlain);
}

TEST(LayoutAssignment, TheConvolutionsVoteOnTheirValues) {
  for (Layout prefer : {kCL, kPlain}) {
    Plan p;
    Value *x = p.input("x", "gpu:0");
    Value *a = p.node(Op::Relu, {x}, "gpu:0");
    Value *conv = p.node(Op::Relu, {a}, "gpu:0", false, prefer);
    p.output(p.plainNode(Op::Relu, {p.node(Op::Relu, {conv}, "gpu:0")}, "gpu:0"));
    auto m = p.assign();
    EXPECT_EQ(layoutOf(m, a), prefer) << "the convolution's operand";
    EXPECT_EQ(layoutOf(m, conv), prefer) << "the convolution's result";
  }
}

} // namespace
} // namespace graphc
