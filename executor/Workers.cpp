#include "executor/Workers.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"

// MPI's C API only: Open MPI's (deprecated) C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include <unistd.h>

namespace graphc {

struct Workers::Comms {
  MPI_Comm control = MPI_COMM_NULL; ///< every rank: the plan's rendezvous
  /// The training ranks (with ps tasks; a dup of the world without): their
  /// agreements and gathers, and the parent of the groups' communicators.
  MPI_Comm training = MPI_COMM_NULL, trainingControl = MPI_COMM_NULL;
  MPI_Comm messages = MPI_COMM_NULL; ///< exchange() and receiveAny()
  std::map<std::string, MPI_Comm, std::less<>> groups;

  MPI_Comm workers() const { return trainingControl != MPI_COMM_NULL ? trainingControl : control; }
};

namespace {

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

std::string seconds(std::chrono::milliseconds t) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3g", std::chrono::duration<double>(t).count());
  return buf;
}

/// A hash of this machine's name (FNV-1a), to tell which ranks share it.
uint64_t hostHash() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char *c = name; *c; ++c)
    h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h;
}

/// The process is gone: no /proc entry, or a zombie not yet reaped.
bool processGone(uint64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return true;
  // "pid (comm) S ...": the state follows the last ')'.
  size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' ||
         line[paren + 2] == 'X';
}

} // namespace

bool Workers::launchedByMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

Workers &Workers::current() {
  static Workers *world = new Workers();
  return *world;
}

llvm::Expected<Workers *> Workers::start() {
  Workers &w = current();
  if (w.mpi_ || !launchedByMpirun())
    return &w;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS)
      return makeError("MPI_Init_thread failed: " + mpiErrorText(rc));
    if (provided < MPI_THREAD_SERIALIZED)
      return makeError("this MPI library gives thread level " + llvm::Twine(provided) +
                       "; graphrun needs MPI_THREAD_SERIALIZED");
  }
  // Errors come back as codes; each call site turns one into a message.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  w.rank_ = (unsigned)rank;
  w.size_ = (unsigned)size;
  w.mpi_ = true;
  w.comms_ = std::make_unique<Comms>();
  MPI_Comm_dup(MPI_COMM_WORLD, &w.comms_->control);
  return &w;
}

Workers::~Workers() = default;

std::string Workers::whoAmI() const {
  if (!mpi_)
    return "";
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
}

llvm::Error Workers::waitAll(void *requests, int n, llvm::StringRef collective, void *statuses,
                             std::chrono::steady_clock::time_point until) {
  auto *reqs = static_cast<MPI_Request *>(requests);
  auto *stats = static_cast<MPI_Status *>(statuses);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = until == Clock::time_point{} ? start + timeout_ : until;
  // Test often at first (a collective of small tensors completes in
  // microseconds), then sleep longer between tests, up to 200 us.
  std::chrono::microseconds nap(0);
  auto nextPeerCheck = start;
  for (;;) {
    int done = 0, rc;
    {
      std::lock_guard<std::mutex> lock(mpiMutex_);
      rc = MPI_Testall(n, reqs, &done, stats ? stats : MPI_STATUSES_IGNORE);
    }
    if (rc != MPI_SUCCESS)
      return makeError(collective + " failed: " + mpiErrorText(rc));
    if (done)
      return llvm::Error::success();
    // mpirun ends the job with SIGTERM when a rank dies: say which one.
    if (stop_ && stop_->load() != 0 && Clock::now() >= nextPeerCheck) {
      nextPeerCheck = Clock::now() + std::chrono::milliseconds(20);
      std::string gone = goneRanks();
      if (!gone.empty())
        return makeError(collective + " did not complete: " + gone +
                         (gone.find(", ") == std::string::npos ? " is" : " are") +
                         " gone (killed or crashed); mpirun is ending every rank");
    }
    if (Clock::now() > deadline) {
      // The caller names the step; before the first one, say so. A deadline
      // the caller set is the timeout counted from the silent peer's last
      // message (which the caller names), not from this wait's start.
      const auto waited = until == Clock::time_point{}
                              ? std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start)
                              : timeout_;
      return makeError(collective +
                       (step_.load() >= 0 ? std::string() : std::string(" at start-up")) +
                       " did not complete within " + seconds(waited) +
                       " s: another rank died or stalled (--collective-timeout); ending every rank");
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(std::chrono::microseconds(200), nap + std::chrono::microseconds(10));
  }
}

llvm::Expected<std::vector<uint64_t>> Workers::gather(uint64_t value, llvm::StringRef what) {
  return gatherOn(/*world=*/false, value, what);
}

llvm::Expected<std::vector<uint64_t>> Workers::gatherOn(bool world, uint64_t value,
                                                        llvm::StringRef what) {
  if (!mpi_)
    return std::vector<uint64_t>{value};
  std::vector<unsigned long long> all(world ? size_ : numWorkers());
  unsigned long long mine = value;
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    int rc = MPI_Iallgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1, MPI_UNSIGNED_LONG_LONG,
                            world ? comms_->control : comms_->workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  if (auto e = waitAll(&req, 1, what.str() + " (all-gather)"))
    return e;
  return std::vector<uint64_t>(all.begin(), all.end());
}

llvm::Error Workers::broadcast(llvm::MutableArrayRef<uint8_t> bytes, llvm::StringRef what) {
  if (!mpi_ || numWorkers() == 1 || bytes.empty())
    return llvm::Error::success();
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    int rc = MPI_Ibcast(bytes.data(), (int)bytes.size(), MPI_BYTE, 0, comms_->workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  return waitAll(&req, 1, what.str() + " (broadcast from rank 0)");
}

llvm::Error Workers::agree(uint64_t value, llvm::StringRef what) {
  if (!mpi_)
    return llvm::Error::success();
  auto all = gatherOn(/*world=*/true, value, "comparing the " + what.str());
  if (!all)
    return all.takeError();
  if (llvm::any_of(*all, [&](uint64_t v) { return v != all->front(); })) {
    std::vector<std::string> each;
    for (unsigned r = 0; r < size_; ++r) {
      char hex[24];
      snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)(*all)[r]);
      each.push_back("rank " + std::to_string(r) + " " + hex);
    }
    return makeError("the ranks do not run the same " + what + " (" + llvm::join(each, ", ") +
                     "); start every rank with the same binary, plan and options");
  }
  rendezvous_ = true;
  return learnPeers();
}

llvm::Error Workers::learnPeers() {
  if (!pids_.empty())
    return llvm::Error::success();
  auto pids = gatherOn(/*world=*/true, (uint64_t)getpid(), "learning each rank's process");
  if (!pids)
    return pids.takeError();
  auto hosts = gatherOn(/*world=*/true, hostHash(), "learning each rank's host");
  if (!hosts)
    return hosts.takeError();
  pids_ = std::move(*pids);
  hosts_ = std::move(*hosts);
  return llvm::Error::success();
}

std::string Workers::goneRanks() const {
  std::vector<std::string> gone;
  for (unsigned r = 0; r < pids_.size(); ++r)
    if (r != rank_ && hosts_[r] == hosts_[rank_] && processGone(pids_[r]))
      gone.push_back("rank " + std::to_string(r) + " (pid " + std::to_string(pids_[r]) + ")");
  return llvm::join(gone, ", ");
}

llvm::Error Workers::orFlags(llvm::MutableArrayRef<uint8_t> flags, llvm::StringRef what) {
  if (!mpi_ || numWorkers() == 1 || flags.empty())
    return llvm::Error::success();
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, flags.data(), (int)flags.size(), MPI_UNSIGNED_CHAR,
                            MPI_BOR, comms_->workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  return waitAll(&req, 1, what);
}

llvm::Expected<bool> Workers::any(bool flag, llvm::StringRef what) {
  if (!mpi_ || numWorkers() == 1)
    return flag;
  int mine = flag ? 1 : 0, result = 0;
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    int rc = MPI_Iallreduce(&mine, &result, 1, MPI_INT, MPI_MAX, comms_->workers(), &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  if (auto e = waitAll(&req, 1, what))
    return e;
  return result != 0;
}

llvm::Error Workers::prepareGroups(llvm::ArrayRef<std::string> groups) {
  if (!mpi_)
    return llvm::Error::success();
  std::lock_guard<std::mutex> lock(mpiMutex_);
  for (const std::string &g : groups) {
    if (comms_->groups.count(g))
      continue;
    MPI_Comm c;
    int rc =
        MPI_Comm_dup(comms_->training != MPI_COMM_NULL ? comms_->training : MPI_COMM_WORLD, &c);
    if (rc != MPI_SUCCESS)
      return makeError("a communicator for collective '" + g + "' failed: " + mpiErrorText(rc));
    comms_->groups[g] = c;
  }
  return llvm::Error::success();
}

llvm::Error Workers::allReduceSum(llvm::StringRef group, llvm::ArrayRef<TensorView> tensors,
                                  llvm::StringRef what) {
  if (!mpi_ || numWorkers() == 1)
    return llvm::Error::success();
  auto it = comms_->groups.find(group);
  if (it == comms_->groups.end())
    return makeError("collective '" + group + "' crosses workers but was not prepared (" + what +
                     ")");
  std::vector<MPI_Request> reqs;
  {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    for (const TensorView &t : tensors) {
      if (t.dtype != DType::F32)
        return makeError("collective '" + group + "': " + what + " brings a non-f32 tensor");
      int64_t n = t.numElements();
      if (n == 0)
        continue;
      MPI_Request r;
      int rc = MPI_Iallreduce(MPI_IN_PLACE, t.data, (int)n, MPI_FLOAT, MPI_SUM, it->second, &r);
      if (rc != MPI_SUCCESS)
        return makeError("all-reduce '" + group + "' across workers failed: " + mpiErrorText(rc));
      reqs.push_back(r);
    }
  }
  return waitAll(reqs.data(), (int)reqs.size(),
                 "the all-reduce '" + group.str() + "' across " + std::to_string(numWorkers()) +
                     " workers (" + what.str() + ")");
}

llvm::Error Workers::setPsTasks(unsigned ps) {
  if (ps >= size_)
    return makeError("the run has " + llvm::Twine(size_) + " process" + (size_ == 1 ? "" : "es") +
                     " and " + llvm::Twine(ps) + " ps task" + (ps == 1 ? "" : "s") +
                     ": no rank is left to train");
  if (!mpi_ || ps == 0 || ps_ == ps)
    return llvm::Error::success();
  assert(ps_ == 0 && comms_->groups.empty() && "ps tasks are set once, before any group");
  ps_ = ps;
  std::lock_guard<std::mutex> lock(mpiMutex_);
  // Collective over the world: the training ranks get a communicator, the
  // ps tasks none (MPI_UNDEFINED).
  int rc =
      MPI_Comm_split(MPI_COMM_WORLD, isPsTask() ? MPI_UNDEFINED : 0, (int)rank_, &comms_->training);
  if (rc == MPI_SUCCESS && comms_->training != MPI_COMM_NULL)
    rc = MPI_Comm_dup(comms_->training, &comms_->trainingControl);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &comms_->messages);
  if (rc != MPI_SUCCESS)
    return makeError("splitting the ranks into workers and ps tasks failed: " + mpiErrorText(rc));
  return llvm::Error::success();
}

llvm::Error Workers::exchange(llvm::ArrayRef<Message> sends,
                              llvm::MutableArrayRef<Message> receives, llvm::StringRef what) {
  if (!mpi_ || comms_->messages == MPI_COMM_NULL)
    return makeError(what + ": this process runs no parameter-server exchange");
  std::vector<MPI_Request> reqs;
  {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    // Receives first, so that the peers' replies always find one posted.
    for (Message &m : receives) {
      MPI_Request r;
      int rc = MPI_Irecv(m.data, (int)m.bytes, MPI_BYTE, (int)m.rank, m.tag, comms_->messages, &r);
      if (rc != MPI_SUCCESS)
        return makeError(what + " failed: " + mpiErrorText(rc));
      reqs.push_back(r);
    }
    for (const Message &m : sends) {
      MPI_Request r;
      int rc = MPI_Isend(m.data, (int)m.bytes, MPI_BYTE, (int)m.rank, m.tag, comms_->messages, &r);
      if (rc != MPI_SUCCESS)
        return makeError(what + " failed: " + mpiErrorText(rc));
      reqs.push_back(r);
    }
  }
  std::vector<MPI_Status> statuses(reqs.size());
  if (auto e = waitAll(reqs.data(), (int)reqs.size(), what, statuses.data()))
    return e;
  for (size_t i = 0; i < receives.size(); ++i) {
    int count = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &count);
    receives[i].received = (size_t)count;
  }
  return llvm::Error::success();
}

llvm::Error Workers::receiveAny(Message &into, std::chrono::steady_clock::time_point deadline,
                                llvm::StringRef what) {
  if (!mpi_ || comms_->messages == MPI_COMM_NULL)
    return makeError(what + ": this process runs no parameter-server exchange");
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    int rc = MPI_Irecv(into.data, (int)into.bytes, MPI_BYTE, MPI_ANY_SOURCE, into.tag,
                       comms_->messages, &req);
    if (rc != MPI_SUCCESS)
      return makeError(what + " failed: " + mpiErrorText(rc));
  }
  MPI_Status status;
  if (auto e = waitAll(&req, 1, what, &status, deadline)) {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    MPI_Cancel(&req);
    return e;
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  into.rank = (unsigned)status.MPI_SOURCE;
  into.received = (size_t)count;
  return llvm::Error::success();
}

void Workers::finish() {
  if (!mpi_ || finished_)
    return;
  finished_ = true;
  std::lock_guard<std::mutex> lock(mpiMutex_);
  for (auto &[name, c] : comms_->groups)
    MPI_Comm_free(&c);
  for (MPI_Comm *c : {&comms_->training, &comms_->trainingControl, &comms_->messages})
    if (*c != MPI_COMM_NULL)
      MPI_Comm_free(c);
  MPI_Comm_free(&comms_->control);
  MPI_Finalize();
}

void Workers::abortAll(int code) {
  if (mpi_ && !finished_) {
    std::lock_guard<std::mutex> lock(mpiMutex_);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::_Exit(code);
}

} // namespace graphc
