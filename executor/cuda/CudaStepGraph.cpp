//===- CudaStepGraph.cpp - A whole step as one CUDA graph -----------------===//
//
// Capture: an origin stream on the first device's GPU begins a (relaxed)
// capture and records a start event; every stream of every device waits for
// it, which pulls all of them into the one capture. The device threads then
// issue the step as usual; each device's synchronize() joins its streams
// into its marker stream and records an end event, which the origin waits
// for before the capture ends. The graph may span several GPUs.
//
// Launch: the work issued before the step on the devices' compute streams
// (prefetched inputs moved into place) is ordered before the graph by
// events the origin waits for; the origin then waits on the host, polling
// with the executor's timeout.
//
// Also here: the factories the executor calls for CUDA collectives.
//
//===----------------------------------------------------------------------===//

#include "executor/cuda/CudaStepGraph.h"
#include "executor/cuda/CudaCollectives.h"
#include "executor/cuda/CudaDevice.h"

#include "ir/Diagnostics.h"
#include "kernels/cuda/CudaCheck.h"

namespace graphc {

namespace {

class CudaStepGraph : public StepCapture {
public:
  CudaStepGraph(std::vector<CudaDevice *> devices, std::chrono::milliseconds timeout)
      : devices_(std::move(devices)), timeout_(timeout) {}
  ~CudaStepGraph() override;

  llvm::Error begin() override;
  llvm::Error finish() override;
  void abandon() override;
  llvm::Error replay() override;
  bool ready() const override { return exec_ != nullptr; }

private:
  llvm::Error prepare();
  CudaDevice &origin() const { return *devices_.front(); }

  std::vector<CudaDevice *> devices_;
  std::chrono::milliseconds timeout_;
  cudaStream_t originStream_ = nullptr;
  cudaEvent_t start_ = nullptr, done_ = nullptr;
  std::vector<cudaEvent_t> before_; ///< one per device
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

CudaStepGraph::~CudaStepGraph() {
  if (!originStream_)
    return;
  cudaSetDevice(origin().ordinal());
  cudaStreamSynchronize(originStream_);
  if (exec_)
    cudaGraphExecDestroy(exec_);
  if (graph_)
    cudaGraphDestroy(graph_);
  for (size_t i = 0; i < before_.size(); ++i)
    devices_[i]->events().release(before_[i]);
  if (start_)
    origin().events().release(start_);
  if (done_)
    origin().events().release(done_);
  cudaStreamDestroy(originStream_);
}

llvm::Error CudaStepGraph::prepare() {
  if (originStream_)
    return llvm::Error::success();
  if (auto e = origin().makeCurrent())
    return e;
  GRAPHC_CUDA_TRY(cudaStreamCreateWithFlags(&originStream_, cudaStreamNonBlocking));
  for (CudaDevice *d : devices_) {
    auto e = d->events().acquire();
    if (!e)
      return e.takeError();
    before_.push_back(*e);
  }
  auto s = origin().events().acquire();
  if (!s)
    return s.takeError();
  start_ = *s;
  auto d = origin().events().acquire();
  if (!d)
    return d.takeError();
  done_ = *d;
  return llvm::Error::success();
}

llvm::Error CudaStepGraph::begin() {
  if (auto e = prepare())
    return e;
  if (auto e = origin().makeCurrent())
    return e;
  // Relaxed: other threads may still call APIs that a global capture forbids.
  GRAPHC_CUDA_TRY(cudaStreamBeginCapture(originStream_, cudaStreamCaptureModeRelaxed));
  GRAPHC_CUDA_TRY(cudaEventRecord(start_, originStream_));
  for (CudaDevice *d : devices_)
    if (auto e = d->beginCapture(start_))
      return e;
  return llvm::Error::success();
}

llvm::Error CudaStepGraph::finish() {
  if (auto e = origin().makeCurrent())
    return e;
  for (CudaDevice *d : devices_) {
    if (!d->captureEnd())
      return makeError(d->name() + " did not finish issuing the captured step");
    GRAPHC_CUDA_TRY(cudaStreamWaitEvent(originStream_, d->captureEnd(), 0));
  }
  cudaGraph_t graph = nullptr;
  GRAPHC_CUDA_TRY(cudaStreamEndCapture(originStream_, &graph));
  graph_ = graph;
  for (CudaDevice *d : devices_)
    d->endCapture();
  GRAPHC_CUDA_TRY(cudaGraphInstantiate(&exec_, graph_, 0));
  return llvm::Error::success();
}

void CudaStepGraph::abandon() {
  if (originStream_) {
    cudaSetDevice(origin().ordinal());
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(originStream_, &status) == cudaSuccess &&
        status != cudaStreamCaptureStatusNone) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(originStream_, &g);
      if (g)
        cudaGraphDestroy(g);
    }
  }
  if (exec_)
    cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
  if (graph_)
    cudaGraphDestroy(graph_);
  graph_ = nullptr;
  for (CudaDevice *d : devices_)
    d->endCapture();
  cudaGetLastError(); // capture errors are not sticky; keep them out of later calls
}

llvm::Error CudaStepGraph::replay() {
  if (!exec_)
    return makeError("no captured step to replay");
  if (auto e = origin().makeCurrent())
    return e;
  for (size_t i = 0; i < devices_.size(); ++i) {
    GRAPHC_CUDA_TRY(cudaEventRecord(before_[i], devices_[i]->stream(CudaStream::Compute)));
    GRAPHC_CUDA_TRY(cudaStreamWaitEvent(originStream_, before_[i], 0));
  }
  GRAPHC_CUDA_TRY(cudaGraphLaunch(exec_, originStream_));
  GRAPHC_CUDA_TRY(cudaEventRecord(done_, originStream_));
  if (auto e = waitForEvents(done_, timeout_,
                             [](size_t) { return std::string("the step's CUDA graph"); }))
    return e;
  for (CudaDevice *d : devices_)
    if (auto e = d->afterGraphStep())
      return e;
  return llvm::Error::success();
}

} // namespace

std::unique_ptr<StepCapture> createCudaStepCapture(llvm::ArrayRef<Device *> devices,
                                                   std::chrono::milliseconds timeout) {
  std::vector<CudaDevice *> cuda;
  for (Device *d : devices) {
    auto *c = dynamic_cast<CudaDevice *>(d);
    if (!c)
      return nullptr;
    cuda.push_back(c);
  }
  if (cuda.empty())
    return nullptr;
  return std::make_unique<CudaStepGraph>(std::move(cuda), timeout);
}

llvm::Expected<std::unique_ptr<CollectiveEngine>>
createCudaCollectives(std::chrono::milliseconds timeout,
                      const std::map<std::string, std::vector<Device *>> &groups,
                      const std::set<std::string> &acrossWorkers, CrossWorkerExchange *exchange) {
  std::map<std::string, std::vector<CudaDevice *>> cuda;
  for (const auto &[name, devices] : groups)
    for (Device *d : devices) {
      auto *c = dynamic_cast<CudaDevice *>(d);
      if (!c)
        return makeError("collective '" + name + "': " + d->name() + " is not a CUDA device");
      cuda[name].push_back(c);
    }
  auto engine = CudaCollectives::create(timeout, cuda, acrossWorkers, exchange);
  if (!engine)
    return engine.takeError();
  return std::unique_ptr<CollectiveEngine>(std::move(*engine));
}

} // namespace graphc
