//===- StreamHazardsTest.cpp - Which stream waits for which ---------------===//
//
// The rules of executor/cuda/StreamHazards.h on hand-made operation
// sequences: the waits a GPU device turns into events, checked without one.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/StreamHazards.h"
#include "executor/cuda/CudaStreams.h"

#include <gtest/gtest.h>

using namespace graphc;

namespace {
constexpr unsigned kCompute = (unsigned)CudaStream::Compute;
constexpr unsigned kCopyIn = (unsigned)CudaStream::CopyIn;
constexpr unsigned kCollective = (unsigned)CudaStream::Collective;
constexpr unsigned kMarker = (unsigned)CudaStream::Marker;

ByteRange bytes(uintptr_t begin, uintptr_t end) {
  return {begin, end};
}

std::vector<StreamPoint> waits(const StreamHazards::Issue &i) {
  return std::vector<StreamPoint>(i.waits.begin(), i.waits.end());
}
} // namespace

TEST(StreamHazards, ComputeAloneNeverWaits) {
  StreamHazards h(kTrackedCudaStreams);
  for (int i = 0; i < 5; ++i) {
    auto issue = h.issue(kCompute, {bytes(0, 100)}, {bytes(100, 200)});
    EXPECT_TRUE(issue.waits.empty());
    EXPECT_EQ(issue.ticket, (uint64_t)i + 1);
  }
  EXPECT_EQ(h.pendingCount(), 0u) << "compute operations are never kept";
}

TEST(StreamHazards, ACopyWaitsForComputeIssuedBeforeIt) {
  // The copy's destination may be bytes an earlier kernel still reads.
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCompute, {bytes(0, 100)}, {bytes(100, 200)});
  h.issue(kCompute, {bytes(100, 200)}, {bytes(200, 300)});
  auto copy = h.issue(kCopyIn, {}, {bytes(0, 100)});
  EXPECT_EQ(waits(copy), (std::vector<StreamPoint>{{kCompute, 2}}));
  // Nothing new on compute: the next copy is already ordered.
  auto copy2 = h.issue(kCopyIn, {}, {bytes(300, 400)});
  EXPECT_TRUE(copy2.waits.empty());
}

TEST(StreamHazards, ACopyAtTheStepStartWaitsForNothing) {
  StreamHazards h(kTrackedCudaStreams);
  EXPECT_TRUE(h.issue(kCopyIn, {}, {bytes(0, 64)}).waits.empty());
}

TEST(StreamHazards, KernelsWaitOnlyForTheCopiesTheyTouch) {
  StreamHazards h(kTrackedCudaStreams);
  auto a = h.issue(kCopyIn, {}, {bytes(0, 100)});   // layer 1 weights
  auto b = h.issue(kCopyIn, {}, {bytes(100, 200)}); // layer 9 weights
  EXPECT_EQ(a.ticket, 1u);
  EXPECT_EQ(b.ticket, 2u);
  // A kernel that reads only the first copy waits for it, not the second.
  auto k1 = h.issue(kCompute, {bytes(0, 100)}, {bytes(1000, 1100)});
  EXPECT_EQ(waits(k1), (std::vector<StreamPoint>{{kCopyIn, 1}}));
  // Unrelated work waits for nothing.
  auto k2 = h.issue(kCompute, {bytes(1000, 1100)}, {bytes(2000, 2100)});
  EXPECT_TRUE(k2.waits.empty());
  // Writing over the second copy's destination (WAW) waits for it.
  auto k3 = h.issue(kCompute, {}, {bytes(150, 160)});
  EXPECT_EQ(waits(k3), (std::vector<StreamPoint>{{kCopyIn, 2}}));
  // Both copies are now known to compute and to nobody else: still kept
  // for the other side streams.
  auto again = h.issue(kCompute, {bytes(0, 200)}, {});
  EXPECT_TRUE(again.waits.empty());
}

TEST(StreamHazards, OneWaitCoversEarlierOperationsOfThatStream) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCopyIn, {}, {bytes(0, 10)});
  h.issue(kCopyIn, {}, {bytes(10, 20)});
  h.issue(kCopyIn, {}, {bytes(20, 30)});
  auto k = h.issue(kCompute, {bytes(0, 30)}, {});
  EXPECT_EQ(waits(k), (std::vector<StreamPoint>{{kCopyIn, 3}}));
}

TEST(StreamHazards, ACollectiveReadingAValueWaitsForItsProducerAndGuardsItsBytes) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCompute, {}, {bytes(0, 100)}); // the gradient
  auto ar = h.issue(kCollective, {bytes(0, 100)}, {bytes(0, 100)});
  EXPECT_EQ(waits(ar), (std::vector<StreamPoint>{{kCompute, 1}}));
  // Backward goes on without waiting...
  EXPECT_TRUE(h.issue(kCompute, {bytes(500, 600)}, {bytes(600, 700)}).waits.empty());
  // ...until a kernel reuses the bytes the collective reads (WAR) ...
  auto reuse = h.issue(kCompute, {}, {bytes(50, 60)});
  EXPECT_EQ(waits(reuse), (std::vector<StreamPoint>{{kCollective, 1}}));
}

TEST(StreamHazards, ReadersOfACollectiveReadOnlyBufferDoNotWait) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCollective, {bytes(0, 100)}, {bytes(100, 200)});
  // Reading what the collective only reads is no hazard.
  EXPECT_TRUE(h.issue(kCompute, {bytes(0, 100)}, {bytes(300, 400)}).waits.empty());
  // Reading its output is.
  EXPECT_EQ(waits(h.issue(kCompute, {bytes(150, 151)}, {})),
            (std::vector<StreamPoint>{{kCollective, 1}}));
}

TEST(StreamHazards, KnowledgeIsTransitive) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCopyIn, {}, {bytes(0, 100)});
  // Compute waits for the copy...
  EXPECT_EQ(waits(h.issue(kCompute, {bytes(0, 100)}, {bytes(100, 200)})),
            (std::vector<StreamPoint>{{kCopyIn, 1}}));
  // ...so the collective, waiting for compute, need not wait for the copy
  // even though it writes the copy's bytes.
  auto ar = h.issue(kCollective, {bytes(100, 200)}, {bytes(0, 100)});
  EXPECT_EQ(waits(ar), (std::vector<StreamPoint>{{kCompute, 1}}));
  EXPECT_EQ(h.pendingCount(), 1u) << "the copy is known everywhere; only the collective is kept";
}

TEST(StreamHazards, SideStreamsOrderAgainstEachOther) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCopyIn, {}, {bytes(0, 100)});
  // A collective over bytes that a copy still writes waits for the copy.
  auto ar = h.issue(kCollective, {bytes(0, 100)}, {bytes(0, 100)});
  EXPECT_EQ(waits(ar), (std::vector<StreamPoint>{{kCopyIn, 1}}));
}

TEST(StreamHazards, JoinMarksEverythingSoFar) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCompute, {}, {bytes(0, 10)});
  h.issue(kCopyIn, {}, {bytes(100, 110)});
  h.issue(kCompute, {}, {bytes(20, 30)});
  auto j = h.join(kMarker);
  std::vector<StreamPoint> got(j.begin(), j.end());
  EXPECT_EQ(got, (std::vector<StreamPoint>{{kCompute, 2}, {kCopyIn, 1}}));
  EXPECT_TRUE(h.join(kMarker).empty()) << "nothing new since the last join";
  // Compute did not wait for the copy: a kernel reading it still must.
  EXPECT_EQ(waits(h.issue(kCompute, {bytes(100, 110)}, {})),
            (std::vector<StreamPoint>{{kCopyIn, 1}}));
}

TEST(StreamHazards, PendingOperationsArePrunedOnceEveryIssuingStreamKnowsThem) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCollective, {}, {bytes(500, 510)});
  h.issue(kCopyIn, {}, {bytes(0, 10)});
  EXPECT_EQ(h.pendingCount(), 2u);
  // Compute learns the copy; the collective stream, which has issued, not yet.
  h.issue(kCompute, {bytes(0, 10)}, {});
  EXPECT_EQ(h.pendingCount(), 2u);
  // The collective's next operation waits for compute and so learns the copy;
  // the marker only ever joins, so it does not hold anything back.
  h.issue(kCollective, {}, {bytes(600, 610)});
  EXPECT_EQ(h.pendingCount(), 2u) << "the two collectives are left";
  h.reset();
  EXPECT_EQ(h.pendingCount(), 0u);
  EXPECT_EQ(h.issued(kCompute), 0u);
  EXPECT_TRUE(h.issue(kCopyIn, {}, {bytes(0, 10)}).waits.empty());
}

TEST(StreamHazards, AStreamThatHasNotIssuedDoesNotKeepOperationsPending) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCopyIn, {}, {bytes(0, 10)});
  h.issue(kCompute, {bytes(0, 10)}, {});
  EXPECT_EQ(h.pendingCount(), 0u);
  // A first collective then still comes after the copy, through compute.
  auto ar = h.issue(kCollective, {}, {bytes(0, 10)});
  EXPECT_EQ(waits(ar), (std::vector<StreamPoint>{{kCompute, 1}}));
}

TEST(StreamHazards, EmptyRangesNeverConflict) {
  StreamHazards h(kTrackedCudaStreams);
  h.issue(kCopyIn, {}, {bytes(10, 10)});
  EXPECT_TRUE(h.issue(kCompute, {bytes(0, 100)}, {bytes(0, 100)}).waits.empty());
}
