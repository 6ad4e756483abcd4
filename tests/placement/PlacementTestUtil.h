//===- PlacementTestUtil.h - Hand-built data-parallel graphs ----*- C++ -*-===//
//
// Graphs shaped like what replicate-towers, split-batch and
// aggregate-gradients produce, built by hand so the placement tests do not
// depend on those passes:
//
//   x [B,4] -> SplitBatch (cpu:0) -> tower t: tower_t/dense/MatMul(x_t, w_t)
//     -> tower_t/dense/Relu -> tower_t/loss/ReduceMean; tower_t/grad/w = w_t * c
//   parameter server ("cpu:0", "gpu:K"): one read of w on the parameter
//     device, grads summed by AddN there, one ApplyMomentum {var w, slots}
//   mirrored: a read per tower on gpu:t, AllReduce {rank t} per tower, an
//     ApplyMomentum per tower; w and its slot list a replica per GPU.
//   lr: an Input with neither request nor tower; logits joined by ConcatBatch.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "ir/ShapeInference.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

namespace graphc::testing {

struct TowerGraphOptions {
  int towers = 2;
  bool mirrored = false;              ///< a replica of w per tower
  DeviceId params = DeviceId::host(); ///< else: the parameter device
  int64_t batch = 8;
  bool requestTowerNodes = true; ///< false: tower nodes carry only their tower
  bool reverseTowers = false;    ///< create tower N-1 first (creation-order tests)
};

inline Variable makeVar(std::string name, std::initializer_list<int64_t> dims, VarKind kind) {
  Variable v;
  v.name = std::move(name);
  v.type = TensorType(DType::F32, dims);
  v.kind = kind;
  v.init = {"zeros", {}};
  return v;
}

inline std::unique_ptr<Module> buildTowerGraph(const TowerGraphOptions &o) {
  auto m = std::make_unique<Module>("towers");
  Graph &g = m->main();
  Builder b(g);
  const bool mirrored = o.mirrored;
  std::vector<DeviceId> gpus;
  for (int t = 0; t < o.towers; ++t)
    gpus.push_back(DeviceId::gpu((unsigned)t));
  Variable w = makeVar("dense.weight", {4, 3}, VarKind::Param);
  Variable slot = makeVar("dense.weight.momentum", {4, 3}, VarKind::Slot);
  if (mirrored)
    w.devices = slot.devices = gpus;
  m->addVariable(w);
  m->addVariable(slot);

  Value *x = b.input("x", TensorType(DType::F32, {o.batch, 4}));
  Value *lr = b.input("lr", TensorType(DType::F32, {}));
  b.setRequestedDevice(DeviceId::host());
  Ints sizes;
  for (int t = 0; t < o.towers; ++t)
    sizes.push_back(o.batch / o.towers + (t < o.batch % o.towers ? 1 : 0));
  Attrs split;
  split.set("sizes", sizes);
  Node *splitNode = b.createNode(Op::SplitBatch, {x}, split, "split");
  Value *shared = mirrored ? nullptr : b.variable("dense.weight");
  if (!mirrored)
    shared->producer()->setRequestedDevice(o.params);

  std::vector<Value *> logits(o.towers), grads(o.towers);
  for (int i = 0; i < o.towers; ++i) {
    int t = o.reverseTowers ? o.towers - 1 - i : i;
    b.setTower(t);
    auto towerRequest = [&]() -> std::optional<DeviceId> {
      if (o.requestTowerNodes)
        return gpus[t];
      return std::nullopt;
    };
    b.setRequestedDevice(towerRequest());
    Value *wt = shared;
    if (mirrored) {
      b.setRequestedDevice(gpus[t]);
      wt = b.variable("dense.weight");
      b.setRequestedDevice(towerRequest());
    }
    Builder::Scope tower(b, "tower_" + std::to_string(t));
    Value *r;
    {
      Builder::Scope dense(b, "dense");
      logits[t] = b.create(Op::MatMul, {splitNode->result(t), wt});
      r = b.create(Op::Relu, {logits[t]});
    }
    {
      Builder::Scope loss(b, "loss");
      b.create(Op::ReduceMean, {r});
    }
    Builder::Scope grad(b, "grad");
    grads[t] = b.create(Op::Mul, {wt, b.scalar(0.5f, "scale")}, {}, "w");
  }
  b.setTower(-1);
  b.setRequestedDevice(DeviceId::host());
  Value *joined = b.create(Op::ConcatBatch, logits, {}, "logits");
  g.addOutput(joined);

  Attrs update;
  update.set("var", std::string("dense.weight"));
  update.set("slots", Strings{"dense.weight.momentum"});
  update.set("momentum", 0.9);
  if (mirrored) {
    for (int t = 0; t < o.towers; ++t) {
      b.setTower(t);
      b.setRequestedDevice(gpus[t]);
      Attrs ar;
      ar.set("rank", int64_t(t));
      ar.set("nranks", int64_t(o.towers));
      ar.set("group", std::string("grads"));
      Value *sum =
          b.createNode(Op::AllReduce, {grads[t]}, ar, "tower_" + std::to_string(t) + "/allreduce")
              ->result();
      b.createNode(Op::ApplyMomentum, {sum, lr}, update,
                   "tower_" + std::to_string(t) + "/update/dense.weight");
    }
  } else {
    b.setRequestedDevice(o.params);
    Value *sum = b.create(Op::AddN, grads, {}, "grad/dense.weight");
    b.createNode(Op::ApplyMomentum, {sum, lr}, update, "update/dense.weight");
  }
  if (auto e = verify(*m))
    ADD_FAILURE() << llvm::toString(std::move(e));
  if (auto e = bindBatch(*m, o.batch))
    ADD_FAILURE() << llvm::toString(std::move(e));
  return m;
}

/// The node named `name` (fails the test when missing).
inline const Node &node(const Module &m, llvm::StringRef name) {
  const Node *n = m.findGraph("main")->findNode(name);
  if (!n) {
    ADD_FAILURE() << "no node '" << name.str() << "'";
    static Module empty;
    static Node *dummy =
        Builder(empty.main()).input("missing", TensorType(DType::F32, {}))->producer();
    return *dummy;
  }
  return *n;
}

inline std::string errorText(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}

} // namespace graphc::testing
