//===- MpiWorkers.cpp - The world mpirun starts ---------------------------===//

#include "executor/dist/MpiWorkers.h"

#include "executor/dist/MpiCollectives.h"
#include "executor/dist/MpiMessages.h"
#include "ir/Diagnostics.h"

#include <cassert>
#include <cstdlib>

namespace graphc {

MpiWorkers::MpiWorkers()
    : mpi_(std::make_unique<MpiSession>()), peers_(std::make_unique<PeerWatch>()),
      wait_(std::make_unique<MpiWait>(*mpi_, *peers_)),
      collectives_(std::make_unique<MpiCollectives>(*mpi_, *wait_, *peers_)),
      messages_(std::make_unique<MpiMessages>(*mpi_, *wait_)) {}

MpiWorkers::~MpiWorkers() = default;

llvm::Expected<std::unique_ptr<MpiWorkers>> MpiWorkers::start() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return makeError("MPI is already running in this process: start its world once");
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS)
    return makeError("MPI_Init_thread failed: " + mpiErrorText(rc));
  if (provided < MPI_THREAD_SERIALIZED)
    return makeError("this MPI library gives thread level " + llvm::Twine(provided) +
                     "; graphrun needs MPI_THREAD_SERIALIZED");
  // Errors come back as codes; each call site turns one into a message.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiWorkers> w(new MpiWorkers());
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  w->mpi_->rank = (unsigned)rank;
  w->mpi_->size = (unsigned)size;
  MPI_Comm_dup(MPI_COMM_WORLD, &w->mpi_->control);
  return w;
}

unsigned MpiWorkers::rank() const {
  return mpi_->rank;
}
unsigned MpiWorkers::size() const {
  return mpi_->size;
}
unsigned MpiWorkers::numPsTasks() const {
  return mpi_->ps;
}
WorkerCollectives &MpiWorkers::collectives() {
  return *collectives_;
}
MessageChannel &MpiWorkers::messages() {
  return *messages_;
}
void MpiWorkers::setTimeout(std::chrono::milliseconds t) {
  wait_->setTimeout(t);
}
void MpiWorkers::setStep(int64_t step) {
  wait_->setStep(step);
}
void MpiWorkers::watchStop(const StopFlags *flags) {
  wait_->watchStop(flags);
}

std::string MpiWorkers::whoAmI() const {
  return "rank " + std::to_string(mpi_->rank) + " of " + std::to_string(mpi_->size);
}

llvm::Error MpiWorkers::setPsTasks(unsigned ps) {
  if (auto e = checkPsTasksFit(ps, mpi_->size))
    return e;
  if (ps == 0 || mpi_->ps == ps)
    return llvm::Error::success();
  assert(mpi_->ps == 0 && mpi_->groups.empty() && "ps tasks are set once, before any group");
  mpi_->ps = ps;
  std::lock_guard<std::mutex> lock(mpi_->mutex);
  // Collective over the world: the training ranks get a communicator, the
  // ps tasks none (MPI_UNDEFINED).
  int rc = MPI_Comm_split(MPI_COMM_WORLD, isPsTask() ? MPI_UNDEFINED : 0, (int)mpi_->rank,
                          &mpi_->training);
  if (rc == MPI_SUCCESS && mpi_->training != MPI_COMM_NULL)
    rc = MPI_Comm_dup(mpi_->training, &mpi_->trainingControl);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->messages);
  if (rc != MPI_SUCCESS)
    return makeError("splitting the ranks into workers and ps tasks failed: " + mpiErrorText(rc));
  return llvm::Error::success();
}

void MpiWorkers::finish() {
  if (finished_)
    return;
  finished_ = true;
  std::lock_guard<std::mutex> lock(mpi_->mutex);
  for (auto &[name, c] : mpi_->groups)
    MPI_Comm_free(&c);
  for (MPI_Comm *c : {&mpi_->training, &mpi_->trainingControl, &mpi_->messages})
    if (*c != MPI_COMM_NULL)
      MPI_Comm_free(c);
  MPI_Comm_free(&mpi_->control);
  MPI_Finalize();
}

void MpiWorkers::abortAll(int code) {
  if (!finished_) {
    std::lock_guard<std::mutex> lock(mpi_->mutex);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::_Exit(code);
}

} // namespace graphc
