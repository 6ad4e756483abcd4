//===- CudaPlanTest.cpp - GPU decisions that need no GPU ------------------===//
//
// Which collective path a group takes, which stream a copy goes on, how the
// trace names a GPU's tracks, and when a step may become a CUDA graph.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/CollectivePath.h"
#include "executor/cuda/CudaStreams.h"
#include "executor/cuda/StepCapture.h"
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
  std::vector<DeviceKind> gpus{DeviceKind::CUDA, DeviceKind::CUDA};
#if GRAPHC_HAVE_CUDA
  EXPECT_EQ(stepCaptureRefusal(m.main(), gpus, false, false), "");
  EXPECT_NE(stepCaptureRefusal(m.main(), {DeviceKind::CUDA, DeviceKind::CPU}, false, false)
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
TEST(StepCapture, OpsThatUseTheStepOnTheHostAreRefused) {
  Module m;
  Builder b(m.main());
  Value *x = b.input("x", TensorType(DType::F32, {4}));
  Attrs a;
  a.set("ratio", 0.5);
  a.set("seed", (int64_t)1);
  Node *d = b.createNode(Op::DropoutTrain, {x}, a, "drop");
  m.main().addOutput(d->result(0));
  std::string why = stepCaptureRefusal(m.main(), {DeviceKind::CUDA}, false, false);
  EXPECT_NE(why.find("node '" + d->name() + "' (DropoutTrain) uses the step counter"),
            std::string::npos)
      << why;
}
#endif
