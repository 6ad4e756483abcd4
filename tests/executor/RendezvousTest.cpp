//===- RendezvousTest.cpp - The host meeting before every collective ------===//
//
// The contract the CPU and GPU collective engines share (timeouts naming
// the group, sequence, rank, missing ranks and shapes; mismatched shapes;
// the published value; the last share; aborts), checked with threads and
// no GPU.
//
//===----------------------------------------------------------------------===//

#include "executor/Rendezvous.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

using namespace graphc;
using namespace std::chrono_literals;

namespace {
TensorView view(Dims shape, DType dtype = DType::F32) {
  TensorView v;
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

RendezvousArrival arrival(std::vector<Dims> shapes, std::string caller, void *token = nullptr,
                          llvm::StringRef kind = "AllReduce") {
  RendezvousArrival a;
  a.kind = kind;
  for (Dims &s : shapes) {
    a.inputs.push_back(view(s));
    a.outputs.push_back(view(s));
  }
  a.caller = std::move(caller);
  a.token = token;
  return a;
}
} // namespace

TEST(Rendezvous, AllRanksMeetAndSeeEveryArrival) {
  Rendezvous r(5s);
  int tokens[3] = {10, 11, 12};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(3);
  // What each rank saw at its last call (the arrivals are the call's
  // record, read before leaving it).
  std::vector<uint64_t> sequence(3);
  std::vector<std::vector<void *>> seen(3);
  for (unsigned rank = 0; rank < 3; ++rank)
    threads.emplace_back([&, rank] {
      for (int call = 0; call < 4; ++call) {
        auto m = r.arrive("g", rank, 3,
                          arrival({{2, 3}}, "rank " + std::to_string(rank), &tokens[rank]));
        if (!m) {
          errors[rank] = llvm::toString(m.takeError());
          return;
        }
        sequence[rank] = m->sequence;
        seen[rank].clear();
        for (const RendezvousArrival &a : m->arrivals)
          seen[rank].push_back(a.token);
        r.leave("g", m->sequence);
      }
    });
  for (auto &t : threads)
    t.join();
  for (unsigned rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(errors[rank], "");
    EXPECT_EQ(sequence[rank], 3u) << "each rank numbers its calls 0, 1, 2, 3";
    ASSERT_EQ(seen[rank].size(), 3u);
    for (unsigned q = 0; q < 3; ++q)
      EXPECT_EQ(seen[rank][q], &tokens[q]);
  }
}

TEST(Rendezvous, AMissingRankTimesOutNamingGroupKindSequenceRankAndShapes) {
  Rendezvous r(150ms);
  std::string e0, e2;
  std::thread t0([&] {
    auto m = r.arrive("grads/bucket3", 0, 3,
                      arrival({{4, 5}, {7}}, "node 'rs0' on gpu:0", nullptr, "ReduceScatter"));
    e0 = m ? "" : llvm::toString(m.takeError());
  });
  std::thread t2([&] {
    auto m = r.arrive("grads/bucket3", 2, 3,
                      arrival({{4, 5}, {7}}, "node 'rs2' on gpu:2", nullptr, "ReduceScatter"));
    e2 = m ? "" : llvm::toString(m.takeError());
  });
  t0.join();
  t2.join();
  for (const std::string &e : {e0, e2}) {
    EXPECT_NE(e.find("collective 'grads/bucket3' (ReduceScatter) #0"), std::string::npos) << e;
    EXPECT_NE(e.find("ranks not arrived: 1"), std::string::npos) << e;
    EXPECT_NE(e.find("f32[4,5], f32[7]"), std::string::npos) << e;
    EXPECT_NE(e.find("waited 150 ms"), std::string::npos) << e;
  }
  EXPECT_NE(e0.find("rank 0 waited"), std::string::npos) << e0;
  EXPECT_NE(e2.find("rank 2 waited"), std::string::npos) << e2;
}

TEST(Rendezvous, MismatchedShapesNameBothRanks) {
  Rendezvous r(5s);
  std::string e1;
  std::thread t0(
      [&] { llvm::consumeError(r.arrive("g", 0, 2, arrival({{8}}, "node 'a'")).takeError()); });
  std::thread t1([&] {
    auto m = r.arrive("g", 1, 2, arrival({{9}}, "node 'b'"));
    e1 = m ? "" : llvm::toString(m.takeError());
  });
  t0.join();
  t1.join();
  EXPECT_NE(e1.find("node 'b' (rank 1) brings [f32[9]], node 'a' (rank 0) brings [f32[8]]"),
            std::string::npos)
      << e1;
}

TEST(Rendezvous, OnlyF32IsReduced) {
  Rendezvous r(5s);
  RendezvousArrival a;
  a.inputs.push_back(view({4}, DType::I64));
  a.outputs.push_back(view({4}, DType::I64));
  a.caller = "node 'x'";
  auto m = r.arrive("solo", 0, 1, a);
  ASSERT_FALSE(bool(m));
  EXPECT_NE(llvm::toString(m.takeError()).find("f32 required"), std::string::npos);
}

TEST(Rendezvous, RankCountsMustAgree) {
  Rendezvous r(5s);
  std::thread t([&] { llvm::consumeError(r.arrive("g", 0, 2, arrival({{1}}, "a")).takeError()); });
  // Give rank 0 time to create the group with two ranks.
  std::this_thread::sleep_for(20ms);
  auto m = r.arrive("g", 1, 3, arrival({{1}}, "node 'b'"));
  ASSERT_FALSE(bool(m));
  EXPECT_NE(llvm::toString(m.takeError()).find("node 'b' says rank 1 of 3, the group has 2"),
            std::string::npos);
  r.abort();
  t.join();
}

TEST(Rendezvous, TheLeaderPublishesAndTheOthersAwait) {
  Rendezvous r(5s);
  int done = 42;
  void *got[2] = {nullptr, nullptr};
  std::thread leader([&] {
    auto m = r.arrive("g", 0, 3, arrival({{1}}, "leader"));
    ASSERT_TRUE(bool(m));
    std::this_thread::sleep_for(20ms);
    r.publish("g", m->sequence, &done);
    r.leave("g", m->sequence);
  });
  std::vector<std::thread> others;
  for (unsigned rank = 1; rank < 3; ++rank)
    others.emplace_back([&, rank] {
      auto m = r.arrive("g", rank, 3, arrival({{1}}, "other"));
      ASSERT_TRUE(bool(m));
      auto v = r.awaitPublished("g", m->sequence, rank, "the leader");
      ASSERT_TRUE(bool(v));
      got[rank - 1] = *v;
      r.leave("g", m->sequence);
    });
  leader.join();
  for (auto &t : others)
    t.join();
  EXPECT_EQ(got[0], &done);
  EXPECT_EQ(got[1], &done);
}

TEST(Rendezvous, AwaitingALeaderThatNeverPublishesTimesOut) {
  Rendezvous r(100ms);
  auto m = r.arrive("solo", 0, 1, arrival({{1}}, "x"));
  ASSERT_TRUE(bool(m));
  auto v = r.awaitPublished("solo", m->sequence, 0, "rank 0 to enqueue the reduction");
  ASSERT_FALSE(bool(v));
  EXPECT_NE(llvm::toString(v.takeError()).find("rank 0 waited 100 ms for rank 0 to enqueue"),
            std::string::npos);
}

TEST(Rendezvous, ExactlyTheLastRankToFinishItsSharePublishes) {
  Rendezvous r(5s);
  constexpr unsigned kRanks = 4, kCalls = 3;
  std::vector<unsigned> lasts(kCalls, 0);
  std::vector<std::string> errors(kRanks);
  std::mutex m;
  std::vector<std::thread> ts;
  for (unsigned rank = 0; rank < kRanks; ++rank)
    ts.emplace_back([&, rank] {
      for (unsigned call = 0; call < kCalls; ++call) {
        auto met = r.arrive("g", rank, kRanks, arrival({{3}}, "rank " + std::to_string(rank)));
        if (!met) {
          errors[rank] = llvm::toString(met.takeError());
          return;
        }
        if (r.finishShare("g", met->sequence)) {
          {
            std::lock_guard<std::mutex> lock(m);
            ++lasts[met->sequence];
          }
          r.publish("g", met->sequence, nullptr);
        } else if (auto v = r.awaitPublished("g", met->sequence, rank, "the last share"); !v) {
          errors[rank] = llvm::toString(v.takeError());
          return;
        }
        r.leave("g", met->sequence);
      }
    });
  for (auto &t : ts)
    t.join();
  for (const std::string &e : errors)
    EXPECT_EQ(e, "");
  EXPECT_EQ(lasts, std::vector<unsigned>(kCalls, 1u));
}

TEST(Rendezvous, AbortWakesWaitersWithTheSecondaryMessage) {
  Rendezvous r(10s);
  std::string e;
  std::thread t([&] {
    auto m = r.arrive("g", 0, 2, arrival({{1}}, "x"));
    e = m ? "" : llvm::toString(m.takeError());
  });
  std::this_thread::sleep_for(20ms);
  r.abort();
  t.join();
  // The executor reports the root cause, not errors that say this.
  EXPECT_NE(e.find("another device failed"), std::string::npos) << e;
}

TEST(Rendezvous, ResetLinesRanksUpAfterAFailedStep) {
  Rendezvous r(100ms);
  // Step 1: rank 0 arrives for call #0, rank 1 never does.
  llvm::consumeError(r.arrive("g", 0, 2, arrival({{1}}, "x")).takeError());
  r.reset();
  // Step 2: both meet, as call #1 of each.
  std::vector<uint64_t> seq(2, 99);
  std::vector<std::thread> ts;
  for (unsigned rank = 0; rank < 2; ++rank)
    ts.emplace_back([&, rank] {
      auto m = r.arrive("g", rank, 2, arrival({{1}}, "x"));
      if (m)
        seq[rank] = m->sequence;
      else
        llvm::consumeError(m.takeError());
    });
  for (auto &t : ts)
    t.join();
  EXPECT_EQ(seq[0], 1u);
  EXPECT_EQ(seq[1], 1u);
}
