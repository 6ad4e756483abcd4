//===- CudaPlanTest.cpp - GPU decisions that need no GPU ------------------===//
//
// Which collective path a group takes, which stream a copy goes on, how the
// trace names a GPU's tracks, when a step may become a CUDA graph, and when
// a device's step counter must be set from the host.
//
//===----------------------------------------------------------------------===//

#include "executor/StepCapture.h"
#include "executor/cuda/CollectivePath.h"
#include "executor/cuda/CudaStreams.h"
#include "executor/cuda/StepCounterSync.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace graphc;

TEST(CollectivePath, DistinctGpusUseNccl) {
  EXPECT_EQ(chooseCollectivePath({0, 1}), CollectivePath::Nccl);
  EXPECT_EQ(chooseCollectivePath({3, 1, 2, 0}), CollectivePath::Nccl);
}

TEST(CollectivePath, RanksOnOneGpuUseTheOwnKernel) {
  // --emulate 4 towers on one H100: NCCL refuses duplicate GPUs.
  EXPECT_EQ(chooseCollectivePath({0, 0, 0, 0}), CollectivePath::SharedGpu);
  EXPECT_EQ(chooseCollectivePath({2}), CollectivePath::SharedGpu);
}

TEST(CollectivePath, AMixUsesTheOwnKernelOverPeerAccess) {
  EXPECT_EQ(chooseCollectivePath({0, 0, 1, 1}), CollectivePath::PeerKernel);
  EXPECT_EQ(chooseCollectivePath({0, 1, 0}), CollectivePath::PeerKernel);
  EXPECT_EQ(collectivePathName(CollectivePath::PeerKernel),
            "own reduction across GPUs (peer access)");
}

TEST(CollectivePath, AcrossWorkersAlwaysNcclButNeverTwoRanksOnOneGpu) {
  // Whatever this worker's GPUs, a group across workers sums with NCCL.
  EXPECT_EQ(chooseCollectivePath({0}, 2), CollectivePath::NcclAcrossWorkers);
  EXPECT_EQ(chooseCollectivePath({0, 1}, 3), CollectivePath::NcclAcrossWorkers);
  EXPECT_EQ(chooseCollectivePath({0}, 1), CollectivePath::SharedGpu);
  EXPECT_EQ(collectivePathName(CollectivePath::NcclAcrossWorkers), "NCCL across workers");
  EXPECT_EQ(acrossWorkersRefusal("grads_0", {0}), "");
  EXPECT_EQ(acrossWorkersRefusal("grads_0", {1, 0, 2}), "");
  // NCCL refuses two ranks on one GPU: --emulate onto fewer GPUs.
  EXPECT_EQ(acrossWorkersRefusal("grads_0", {0, 1, 0}),
            "collective 'grads_0' spans workers, so it sums with NCCL, which takes one rank per "
            "physical GPU, but this worker's ranks share GPUs (physical GPUs 0, 1, 0); give each "
            "of the worker's GPUs its own physical GPU (not --emulate onto fewer)");
}

TEST(NcclRankLayout, WorkerOrderThenLocalDeviceOrder) {
  // Workers with 2, 1 and 3 GPUs: ranks 0-1, 2, 3-5.
  const std::vector<uint64_t> counts{2, 1, 3};
  const unsigned first[] = {0, 2, 3};
  for (unsigned w = 0; w < 3; ++w) {
    auto l = ncclRankLayout("g", counts, w);
    ASSERT_TRUE(bool(l)) << llvm::toString(l.takeError());
    EXPECT_EQ(l->worker, w);
    EXPECT_EQ(l->firstRank, first[w]) << "worker " << w;
    EXPECT_EQ(l->localRanks, counts[w]);
    EXPECT_EQ(l->nranks, 6u);
    EXPECT_EQ(l->perWorker, (std::vector<unsigned>{2, 1, 3}));
  }
  // Every rank once: the workers' ranges tile 0 .. nranks-1.
  std::vector<int> seen(6, 0);
  for (unsigned w = 0; w < 3; ++w) {
    auto l = ncclRankLayout("g", counts, w);
    ASSERT_TRUE(bool(l));
    for (unsigned r = 0; r < l->localRanks; ++r)
      ++seen[l->firstRank + r];
  }
  EXPECT_EQ(seen, std::vector<int>(6, 1));
  auto one = ncclRankLayout("g", std::vector<uint64_t>{1}, 0);
  ASSERT_TRUE(bool(one));
  EXPECT_EQ(one->nranks, 1u);
}

TEST(NcclRankLayout, AWorkerWithoutGpusOrTooManyRanksIsAnError) {
  auto none = ncclRankLayout("grads_0", std::vector<uint64_t>{2, 0}, 0);
  ASSERT_FALSE(bool(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "collective 'grads_0': worker 1 has none of its GPUs (the workers' plans differ)");
  auto huge = ncclRankLayout("g", std::vector<uint64_t>{1, 1ull << 31}, 1);
  ASSERT_FALSE(bool(huge));
  EXPECT_NE(llvm::toString(huge.takeError()).find("NCCL takes at most 2147483647"),
            std::string::npos);
}

//===-- The device's step counter (StepCounterSync.h) ----------------------===//

TEST(StepCounterSync, EagerStepsSetOnlyTheFirstStep) {
  StepCounterSync c;
  // The first step: nothing is known, so the counter is set.
  EXPECT_EQ(c.before({0, 0}), (DeviceStep{0, 0}));
  c.advanced(); // the step's end, issued eagerly
  for (uint64_t s = 1; s < 5; ++s) {
    EXPECT_FALSE(c.before({s, 0}).has_value()) << "step " << s;
    c.advanced();
  }
  EXPECT_EQ(c.known(), (DeviceStep{5, 0}));
}

TEST(StepCounterSync, ACapturedStepThenReplaysNeedNoHostWork) {
  StepCounterSync c;
  EXPECT_TRUE(c.before({0, 0})); // step 0, eager
  c.advanced();
  // Step 1 is captured: its advance is in the graph and has not run.
  EXPECT_FALSE(c.before({1, 0}).has_value());
  // The graph is launched for step 1, then replayed for 2, 3, ...: each run
  // ends with the graph's advance, and nothing is ever set.
  for (uint64_t s = 1; s < 6; ++s) {
    EXPECT_FALSE(c.before({s, 0}).has_value()) << "step " << s;
    c.advanced(); // afterGraphStep
  }
}

TEST(StepCounterSync, AMovedStepOrAMicroStepIsSetOutsideTheGraph) {
  StepCounterSync c;
  c.before({0, 0});
  c.advanced();
  // Executor::setStep (a resumed run) moves the step: set before the replay.
  EXPECT_EQ(c.before({40, 0}), (DeviceStep{40, 0}));
  c.advanced();
  EXPECT_FALSE(c.before({41, 0}).has_value());
  c.advanced();
  // Gradient accumulation: micro-steps keep the step, move the micro-step.
  EXPECT_FALSE(c.before({42, 0}).has_value());
  c.advanced();
  EXPECT_EQ(c.before({43, 1}), (DeviceStep{43, 1}));
  c.advanced();
  EXPECT_EQ(c.before({43, 2}), (DeviceStep{43, 2}));
}

TEST(CudaStreams, CopiesFromTheDeviceItselfStayOnCompute) {
  EXPECT_EQ(streamForReceive(CopySource::SameDevice), CudaStream::Compute);
  EXPECT_EQ(streamForReceive(CopySource::Host), CudaStream::CopyIn);
  EXPECT_EQ(streamForReceive(CopySource::SamePhysicalGpu), CudaStream::CopyIn);
  EXPECT_EQ(streamForReceive(CopySource::OtherGpu), CudaStream::CopyIn);
}

TEST(CudaStreams, TraceTracksAreTheTimedStreams) {
  std::vector<std::string> tracks = cudaTraceStreams();
  EXPECT_EQ(tracks, (std::vector<std::string>{"compute", "copy-in", "collective"}));
  // Every stream that carries step work has a track under its own name.
  for (CudaStream s : {CudaStream::Compute, CudaStream::CopyIn, CudaStream::Collective}) {
    int i = cudaTraceStreamIndex(s);
    ASSERT_GE(i, 0);
    EXPECT_EQ(tracks[i], cudaStreamName(s));
  }
  EXPECT_EQ(cudaTraceStreamIndex(CudaStream::Marker), -1);
  // The executor records feeds on the second track: host-to-device.
  EXPECT_EQ(tracks[1], "copy-in");
  EXPECT_EQ(kTrackedCudaStreams, (unsigned)CudaStream::Marker + 1);
}

TEST(StepCapture, RefusalsNameTheReason) {
  Module m;
  Builder b(m.main());
  m.main().addOutput(b.create(Op::Relu, {b.input("x", TensorType(DType::F32, {4}))}));
  std::vector<DeviceKind> gpus{DeviceKind::GPU, DeviceKind::GPU};
#if GRAPHC_HAVE_CUDA
  EXPECT_EQ(stepCaptureRefusal(m.main(), gpus, false, false), "");
  EXPECT_NE(stepCaptureRefusal(m.main(), {DeviceKind::GPU, DeviceKind::CPU}, false, false)
                .find("host device"),
            std::string::npos);
  EXPECT_NE(stepCaptureRefusal(m.main(), gpus, true, false).find("profiling"), std::string::npos);
  EXPECT_NE(stepCaptureRefusal(m.main(), gpus, false, true).find("check-numerics"),
            std::string::npos);
#else
  EXPECT_EQ(stepCaptureRefusal(m.main(), gpus, false, false), "this build has no CUDA backend");
#endif
}

#if GRAPHC_HAVE_CUDA
TEST(StepCapture, DropoutReadsTheDeviceCounterAndIsCaptured) {
  // Its kernel derives the step's masks from the device's step counter,
  // which the captured graph advances (kernels/DeviceStep.h).
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {4}));
  Attrs a;
  a.set("ratio", 0.5);
  a.set("seed", (int64_t)1);
  Node *d = b.createNode(Op::DropoutTrain, {x}, a, "drop");
  m.main().addOutput(d->result(0));
  EXPECT_EQ(stepCaptureRefusal(m.main(), {DeviceKind::GPU}, false, false), "");
}

TEST(StepCapture, AdamUsesTheStepOnTheHostAndIsRefused) {
  Module m;
  Builder b(m.main());
  Variable v;
  v.name = "w";
  v.type = TensorType(DType::F32, {4});
  m.addVariable(v);
  for (const char *slot : {"w_m", "w_v"}) {
    Variable s;
    s.name = slot;
    s.type = v.type;
    s.kind = VarKind::Slot;
    m.addVariable(s);
  }
  Value *g = b.input("g", v.type);
  Value *lr = b.input("lr", TensorType(DType::F32, {}));
  Attrs a;
  a.set("var", std::string("w"));
  a.set("slots", Strings{"w_m", "w_v"});
  Node *adam = b.createNode(Op::ApplyAdam, {g, lr}, a, "w_update");
  ASSERT_TRUE(adam);
  std::string why = stepCaptureRefusal(m.main(), {DeviceKind::GPU}, false, false);
  EXPECT_EQ(why, "node 'w_update' (ApplyAdam) uses the step counter on the host");
}

TEST(StepCapture, CollectivesAcrossWorkersAreIssuedStepByStep) {
  for (int64_t workers : {1, 2}) {
    Module m;
    Builder b(m.main());
    Value *x = b.input("x", TensorType(DType::F32, {4}));
    Attrs a;
    a.set("group", std::string("grads_0"));
    a.set("rank", (int64_t)0);
    a.set("nranks", (int64_t)1);
    a.set("reduction", std::string("sum"));
    if (workers > 1)
      a.set("workers", workers);
    Node *ar = b.createNode(Op::AllReduce, {x}, a, "ar");
    m.main().addOutput(ar->result(0));
    std::string why = stepCaptureRefusal(m.main(), {DeviceKind::GPU}, false, false);
    if (workers == 1)
      EXPECT_EQ(why, "");
    else
      EXPECT_EQ(why, "collective 'grads_0' spans workers (NCCL across processes is issued step "
                     "by step)");
  }
}
#endif
