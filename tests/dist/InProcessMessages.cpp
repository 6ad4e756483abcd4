//===- InProcessMessages.cpp - A world of threads for the ps protocol -----===//

#include "InProcessMessages.h"

#include "ir/Diagnostics.h"

#include <algorithm>
#include <cstring>

namespace graphc::disttest {

class InProcessMessages::Channel final : public MessageChannel {
public:
  Channel(InProcessMessages &world, unsigned rank) : world_(world), rank_(rank) {}
  unsigned rank() const override { return rank_; }
  unsigned numWorkers() const override { return world_.workers_; }
  std::chrono::milliseconds timeout() const override { return world_.timeout_; }
  void setStep(int64_t) override {}

  llvm::Error exchange(llvm::ArrayRef<Message> sends, llvm::MutableArrayRef<Message> receives,
                       llvm::StringRef what) override {
    for (const Message &m : sends)
      world_.post(rank_, m);
    const auto deadline = std::chrono::steady_clock::now() + world_.timeout_;
    for (Message &m : receives)
      if (auto e = world_.take(rank_, m.rank, m, deadline, what))
        return e;
    return llvm::Error::success();
  }
  llvm::Error receiveAny(Message &into, std::chrono::steady_clock::time_point deadline,
                         llvm::StringRef what) override {
    return world_.take(rank_, std::nullopt, into, deadline, what);
  }

private:
  InProcessMessages &world_;
  unsigned rank_;
};

InProcessMessages::InProcessMessages(unsigned workers, unsigned tasks,
                                     std::chrono::milliseconds timeout)
    : workers_(workers), timeout_(timeout), mailboxes_(workers + tasks) {
  for (unsigned r = 0; r < workers + tasks; ++r)
    channels_.push_back(std::make_unique<Channel>(*this, r));
}

InProcessMessages::~InProcessMessages() = default;

MessageChannel &InProcessMessages::channel(unsigned rank) {
  return *channels_.at(rank);
}

void InProcessMessages::post(unsigned from, const Message &m) {
  Envelope e{from, m.tag, std::vector<char>(m.bytes)};
  std::memcpy(e.bytes.data(), m.data, m.bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  mailboxes_.at(m.rank).push_back(std::move(e));
  arrived_.notify_all();
}

llvm::Error InProcessMessages::take(unsigned to, std::optional<unsigned> from, Message &into,
                                    std::chrono::steady_clock::time_point deadline,
                                    llvm::StringRef what) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::deque<Envelope> &box = mailboxes_[to];
  auto match = [&] {
    return std::find_if(box.begin(), box.end(), [&](const Envelope &e) {
      return e.tag == into.tag && (!from || e.from == *from);
    });
  };
  if (!arrived_.wait_until(lock, deadline, [&] { return match() != box.end(); }))
    return makeError(what + " did not complete before its deadline (in-process messages)");
  auto it = match();
  if (it->bytes.size() > into.bytes)
    return makeError(what + ": a message of " + llvm::Twine((uint64_t)it->bytes.size()) +
                     " bytes for a buffer of " + llvm::Twine((uint64_t)into.bytes));
  std::memcpy(into.data, it->bytes.data(), it->bytes.size());
  into.received = it->bytes.size();
  into.rank = it->from;
  box.erase(it);
  return llvm::Error::success();
}

} // namespace graphc::disttest
