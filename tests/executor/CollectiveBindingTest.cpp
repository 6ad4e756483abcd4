//===- CollectiveBindingTest.cpp - Which engine sums a group, and how -----===//
//
// bindGroup: host groups across workers sum with MPI after the CPU engine,
// GPU groups across workers with NCCL; what a run cannot sum is an error
// naming the group.
//
//===----------------------------------------------------------------------===//

#include "executor/Collectives.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {
class HostWorkers : public CrossWorkerReducer {
public:
  explicit HostWorkers(unsigned n) : n_(n) {}
  unsigned numWorkers() const override { return n_; }
  llvm::Error prepareGroups(llvm::ArrayRef<std::string>) override { return llvm::Error::success(); }
  llvm::Error allReduceSum(llvm::StringRef, llvm::ArrayRef<TensorView>, llvm::StringRef) override {
    return llvm::Error::success();
  }

private:
  unsigned n_;
};

class GpuWorkers : public CrossWorkerExchange {
public:
  explicit GpuWorkers(unsigned n) : n_(n) {}
  unsigned numWorkers() const override { return n_; }
  unsigned rank() const override { return 0; }
  std::chrono::milliseconds timeout() const override { return std::chrono::seconds(1); }
  llvm::Expected<std::vector<uint64_t>> gather(uint64_t v, llvm::StringRef) override {
    return std::vector<uint64_t>(n_, v);
  }
  llvm::Error broadcast(llvm::MutableArrayRef<uint8_t>, llvm::StringRef) override {
    return llvm::Error::success();
  }

private:
  unsigned n_;
};

std::string errorOf(llvm::Expected<GroupBinding> b) {
  return b ? std::string() : llvm::toString(b.takeError());
}
} // namespace

TEST(CollectiveBinding, InsideOneProcessNeitherMpiNorNccl) {
  for (DeviceKind k : {DeviceKind::CPU, DeviceKind::GPU}) {
    auto b = bindGroup("grads_0", {k, k}, 1, nullptr, nullptr);
    ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
    EXPECT_EQ(b->engine, k);
    EXPECT_EQ(b->across, AcrossWorkers::No);
  }
}

TEST(CollectiveBinding, HostGroupsAcrossWorkersUseMpiGpuGroupsNccl) {
  HostWorkers host(3);
  GpuWorkers gpu(3);
  auto cpu = bindGroup("grads_0", {DeviceKind::CPU, DeviceKind::CPU}, 3, &host, &gpu);
  ASSERT_TRUE(bool(cpu)) << llvm::toString(cpu.takeError());
  EXPECT_EQ(cpu->engine, DeviceKind::CPU);
  EXPECT_EQ(cpu->across, AcrossWorkers::Mpi);
  auto cuda = bindGroup("grads_0", {DeviceKind::GPU, DeviceKind::GPU}, 3, &host, &gpu);
  ASSERT_TRUE(bool(cuda)) << llvm::toString(cuda.takeError());
  EXPECT_EQ(cuda->engine, DeviceKind::GPU);
  EXPECT_EQ(cuda->across, AcrossWorkers::Nccl);
  // One GPU per worker (the sum of a worker's towers) is a group too.
  auto one = bindGroup("workers/loss", {DeviceKind::GPU}, 3, nullptr, &gpu);
  ASSERT_TRUE(bool(one)) << llvm::toString(one.takeError());
  EXPECT_EQ(one->across, AcrossWorkers::Nccl);
}

TEST(CollectiveBinding, WhatCannotBeSummedNamesTheGroup) {
  HostWorkers host(2);
  GpuWorkers gpu(2);
  EXPECT_EQ(errorOf(bindGroup("bn_3", {DeviceKind::CPU, DeviceKind::GPU}, 1, &host, &gpu)),
            "collective 'bn_3' spans host and GPU devices; insert transfers so that all "
            "members are on one kind");
  // GPUs need the exchange, host devices the reducer.
  EXPECT_EQ(errorOf(bindGroup("grads_0", {DeviceKind::GPU}, 2, &host, nullptr)),
            "collective 'grads_0' spans 2 workers, but this process runs alone (start the "
            "plan's workers with mpirun)");
  EXPECT_NE(errorOf(bindGroup("grads_0", {DeviceKind::CPU}, 2, nullptr, &gpu)), "");
  EXPECT_EQ(errorOf(bindGroup("grads_0", {DeviceKind::GPU}, 3, &host, &gpu)),
            "collective 'grads_0' spans 3 workers, but this run has 2");
}
