//===- WorldOfOne.cpp - A process that runs alone -------------------------===//

#include "executor/dist/WorldOfOne.h"

#include <cstdlib>

namespace graphc {

class WorldOfOne::Alone final : public WorkerCollectives {
public:
  unsigned numWorkers() const override { return 1; }
  unsigned rank() const override { return 0; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  llvm::Error agree(uint64_t, llvm::StringRef) override { return llvm::Error::success(); }
  bool rendezvousDone() const override { return false; }
  llvm::Expected<bool> any(bool flag, llvm::StringRef) override { return flag; }
  llvm::Error meet(llvm::StringRef) override { return llvm::Error::success(); }
  llvm::Error orFlags(llvm::MutableArrayRef<uint8_t>, llvm::StringRef) override {
    return llvm::Error::success();
  }
  llvm::Expected<std::vector<uint64_t>> gather(uint64_t value, llvm::StringRef) override {
    return std::vector<uint64_t>{value};
  }
  llvm::Error broadcast(llvm::MutableArrayRef<uint8_t>, llvm::StringRef) override {
    return llvm::Error::success();
  }
  llvm::Error prepareGroups(llvm::ArrayRef<std::string>) override { return llvm::Error::success(); }
  llvm::Error allReduceSum(llvm::StringRef, llvm::ArrayRef<TensorView>, llvm::StringRef) override {
    return llvm::Error::success();
  }

  std::chrono::milliseconds timeout_{std::chrono::seconds(60)};
};

class WorldOfOne::NoMessages final : public MessageChannel {
public:
  explicit NoMessages(const Alone &alone) : alone_(alone) {}
  unsigned rank() const override { return 0; }
  unsigned numWorkers() const override { return 1; }
  std::chrono::milliseconds timeout() const override { return alone_.timeout(); }
  void setStep(int64_t) override {}
  llvm::Error exchange(llvm::ArrayRef<Message>, llvm::MutableArrayRef<Message>,
                       llvm::StringRef what) override {
    return noExchangeError(what);
  }
  llvm::Error receiveAny(Message &, std::chrono::steady_clock::time_point,
                         llvm::StringRef what) override {
    return noExchangeError(what);
  }

private:
  const Alone &alone_;
};

WorldOfOne::WorldOfOne()
    : collectives_(std::make_unique<Alone>()),
      messages_(std::make_unique<NoMessages>(*collectives_)) {}

WorldOfOne::~WorldOfOne() = default;

llvm::Error WorldOfOne::setPsTasks(unsigned ps) {
  return checkPsTasksFit(ps, 1);
}

WorkerCollectives &WorldOfOne::collectives() {
  return *collectives_;
}

MessageChannel &WorldOfOne::messages() {
  return *messages_;
}

void WorldOfOne::setTimeout(std::chrono::milliseconds t) {
  collectives_->timeout_ = t;
}

void WorldOfOne::abortAll(int code) {
  std::_Exit(code);
}

} // namespace graphc
