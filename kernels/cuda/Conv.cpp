//===- Conv.cpp - Convolution and its gradients through cuDNN -------------===//
//
// The CUDA twins of kernels/cpu/Conv.cpp: Conv (x, w[, b]) -> y,
// ConvGradData (dy, w) -> dx and ConvGradFilter (x, dy) -> dw, with groups,
// dilations, strides, asymmetric pads and ceil_mode, through cuDNN's legacy
// convolution API (NCHW, cross-correlation), in f32 or, for --precision
// fp16 and bf16, in f16 or bf16 with f32 accumulation (cuDNN's pseudo-half
// and pseudo-bfloat16 configurations; its tensor cores allowed whatever the
// TF32 switch says, which is about f32; bf16 from compute capability 8.0).
// fp16 plans give a convolution f16 weights; bf16 plans keep them f32 (as
// the CPU's oneDNN takes them), so the kernel narrows the weights and bias
// into scratch before cuDNN reads them, and computes an f32 filter gradient
// in bf16 into scratch and widens it (convTypes, ConvPlan.h): the gradient
// is rounded to bf16 once, as PyTorch's autocast rounds the gradient of its
// bf16 copy of the weights.
//
// At creation (once per node): the descriptors, then the algorithm for this
// shape, measured by cudnnFind (or from cuDNN's heuristics), chosen by
// chooseConvAlgorithm within the device's workspace budget and kept for the
// process and, when measured, in the choice file (ConvPlan.h,
// ConvAlgorithmFile.h), and the scratch it needs: the algorithm's workspace
// plus, for asymmetric pads, the padded x (or padded dx), and the narrowed
// weights and bias or the narrow filter gradient. cuDNN is asked under
// convQueryMath's type: CUDNN_TENSOR_OP_MATH for f16 and bf16, CUDNN_DEFAULT_MATH for
// f32 with TF32 allowed, CUDNN_FMA_MATH for strict FP32.
// A bias is added afterwards by our broadcast Add. A node with an empty
// operand or result makes no cuDNN call; its results are zero-filled.
//
// Channels-last (GpuLayoutRules.h): where the run's GPU layout policy allows
// the data type, cuDNN computes in NHWC with a KRSC filter (its tensor-core
// kernels' own layout: on NCHW tensors it transposes around every call).
// Each operand and the result may then come plain or channels-last; one that
// is plain is transposed through scratch by our layout copy (LayoutDevice.h),
// counted as a reorder, and converted on the way where the type differs too
// (f32 weights of a bf16 plan narrowed and transposed in one pass). The
// weights stay plain variables: an fp16 plan's f16 copy of them is a Cast,
// which writes it KRSC (the executor keeps it channels-last), so only plans
// whose convolutions read the f32 variables themselves (bf16, fp32 under
// --gpu-layout nhwc) transpose weights per step, into scratch.
//
//===----------------------------------------------------------------------===//

#include "kernels/LoopNest.h"
#include "kernels/cuda/ConvAlgorithmFile.h"
#include "kernels/cuda/ConvPlan.h"
#include "kernels/cuda/CudaKernel.h"
#include "kernels/cuda/CudnnDescriptors.h"
#include "kernels/cuda/ElemTypeOf.h"
#include "kernels/cuda/ShapeDevice.h"

#include <mutex>

namespace graphc {
namespace {

using namespace cuda;

/// Selects the backend's device for the calls of a scope (kernels may be
/// created on a thread whose current device is another GPU).
class DeviceScope {
public:
  explicit DeviceScope(int ordinal) {
    if (cudaGetDevice(&previous_) != cudaSuccess)
      previous_ = -1;
    status_ = cudaSetDevice(ordinal);
  }
  ~DeviceScope() {
    if (previous_ >= 0)
      cudaSetDevice(previous_);
  }
  cudaError_t status() const { return status_; }

private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

cudnnMathType_t cudnnMath(ConvMath m) {
  switch (m) {
  case ConvMath::TensorOp:
    return CUDNN_TENSOR_OP_MATH;
  case ConvMath::Fma:
    return CUDNN_FMA_MATH;
  case ConvMath::Default:
    break;
  }
  return CUDNN_DEFAULT_MATH;
}

bool isTensorOp(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

/// cuDNN's perf answers as candidates, and each answer's math type (the perf
/// structs of the three directions have the same fields).
template <typename Perf>
void takeAnswers(const Perf *perf, int count, std::vector<AlgoCandidate> &candidates,
                 std::vector<cudnnMathType_t> &maths) {
  for (int i = 0; i < count; ++i) {
    AlgoCandidate c;
    c.algo = (int)perf[i].algo;
    c.ok = perf[i].status == CUDNN_STATUS_SUCCESS;
    c.memory = perf[i].memory;
    c.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
    c.tensorOps = isTensorOp(perf[i].mathType);
    candidates.push_back(c);
    maths.push_back(perf[i].mathType);
  }
}

class ConvKernel : public CudaKernel {
public:
  using CudaKernel::CudaKernel;

  llvm::Error init() override {
    // Fused activations come from the CPU inference compile only.
    if (node().attrs().has("activation") || node().attrs().has("sum"))
      return nodeError(node(), "a Conv with a fused activation or addend runs on CPU devices only");
    switch (node().op()) {
    case Op::ConvGradData:
      dir_ = ConvDirection::BackwardData;
      break;
    case Op::ConvGradFilter:
      dir_ = ConvDirection::BackwardFilter;
      break;
    default:
      dir_ = ConvDirection::Forward;
      break;
    }
    auto g = convGeometry(node());
    if (!g)
      return g.takeError();
    geo_ = *g;
    llvm::SmallVector<DType, 3> operands;
    for (unsigned i = 0; i < node().numOperands(); ++i)
      operands.push_back(operandType(i).dtype);
    auto types = convTypes(node().op(), operands, resultType().dtype);
    if (!types)
      return types.takeError();
    types_ = *types;
    if (std::string why = backend().dtypeRefusal(types_.data); !why.empty())
      return makeError(why);
    // The answers (GpuLayoutRules.h) say whether this node computes in NHWC.
    compute_ = acceptsLayout(0, Layout::ChannelsLast) ? Layout::ChannelsLast : Layout::Plain;
    bias_ = node().op() == Op::Conv && node().numOperands() == 3;
    empty_ = anyEmpty();
    // Until prepare() says otherwise every tensor is plain, which stages the
    // most: the scratch it sizes covers any layouts.
    planStaging();
    if (empty_)
      return llvm::Error::success();
    low_ = lowerConv(geo_);
    if (auto e = createDescriptors())
      return e;
    DeviceScope scope(backend().ordinal());
    GRAPHC_CUDA_TRY(scope.status());
    if (auto e = checkOutputShape())
      return e;
    if (auto e = chooseAlgorithm())
      return e;
    if (low_.explicitPad) {
      padIn_ = padParams();
      cropOut_ = cropIndex();
    }
    if (bias_) {
      const bool last = compute_ == Layout::ChannelsLast;
      Dims y = last ? channelsLastDims(geo_.y) : geo_.y;
      Dims b = last ? Dims{geo_.w[0]} : Dims{geo_.w[0], 1, 1};
      auto index = broadcastIndex2(node(), y, y, b);
      if (!index)
        return index.takeError();
      biasIndex_ = *index;
    }
    return llvm::Error::success();
  }

  llvm::Error layoutsChosen() override {
    planStaging();
    return llvm::Error::success();
  }

  size_t scratchBytes() const override { return layout(nullptr).bytes(); }

protected:
  llvm::Error enqueue(KernelContext &ctx) override {
    cudaStream_t s = streamOf(ctx);
    if (empty_) {
      for (const TensorView &v : ctx.outputs)
        if (v.bytes())
          GRAPHC_CUDA_TRY(cudaMemsetAsync(v.data, 0, v.bytes(), s));
      return llvm::Error::success();
    }
    Buffers b = layout(ctx.scratch).buffers;
    // The operands as cuDNN takes them: the data type it computes in, the
    // layout it computes in (transposed here where they differ: a reorder).
    const void *in[2];
    for (unsigned i = 0; i < 2; ++i) {
      auto staged = stageIn(ctx.inputs[i], b.in[i], s);
      if (!staged)
        return staged.takeError();
      in[i] = *staged;
    }
    switch (dir_) {
    case ConvDirection::Forward:
      return forward(ctx, b, in[0], in[1], s);
    case ConvDirection::BackwardData:
      return backwardData(ctx, b, in[0], in[1], s);
    case ConvDirection::BackwardFilter:
      return backwardFilter(ctx, b, in[0], in[1], s);
    }
    return llvm::Error::success();
  }

private:
  /// Where the scratch's pieces start (null: not needed).
  struct Buffers {
    void *in[2] = {nullptr, nullptr}; ///< operands 0 and 1 in cuDNN's type and layout
    void *bias = nullptr;             ///< a narrowed bias
    void *padded = nullptr;           ///< x (or dx) with the explicit part of the padding
    void *workspace = nullptr;        ///< the algorithm's
    void *out = nullptr;              ///< the result in cuDNN's type and layout
  };
  struct Placed {
    ScratchLayout scratch;
    Buffers buffers;
    size_t bytes() const { return scratch.bytes(); }
  };

  static int64_t elements(llvm::ArrayRef<int64_t> dims) { return plain::product(dims, 0, 4); }
  size_t elemSize() const { return dtypeSize(types_.data); }
  size_t dataBytes(llvm::ArrayRef<int64_t> dims) const { return elements(dims) * elemSize(); }
  size_t biasBytes() const { return (size_t)geo_.w[0] * elemSize(); }
  bool channelsLast() const { return compute_ == Layout::ChannelsLast; }
  /// The NCHW shape of operand `i` and of the result.
  const Dims &operandDims(unsigned i) const {
    if (dir_ == ConvDirection::Forward)
      return i == 0 ? geo_.x : geo_.w;
    if (dir_ == ConvDirection::BackwardData)
      return i == 0 ? geo_.y : geo_.w;
    return i == 0 ? geo_.x : geo_.y;
  }
  const Dims &resultDims() const {
    return dir_ == ConvDirection::Forward        ? geo_.y
           : dir_ == ConvDirection::BackwardData ? geo_.x
                                                 : geo_.w;
  }

  /// Which tensors pass through scratch: an operand or result whose type or
  /// layout is not cuDNN's (f32 weights beside 16-bit data, a plain tensor
  /// beside an NHWC convolution), and a bias to narrow.
  void planStaging() {
    for (unsigned i = 0; i < 2; ++i)
      stageIn_[i] =
          !empty_ && (operandType(i).dtype != types_.data || operandLayout(i) != compute_);
    stageBias_ = !empty_ && bias_ && types_.wideBias;
    stageOut_ = !empty_ && (resultType().dtype != types_.data || resultLayout() != compute_);
  }

  /// Scratch: the staged operands and bias, the padded tensor (when padding
  /// is explicit), the workspace, then the staged result.
  Placed layout(void *base) const {
    Placed p{ScratchLayout(base), {}};
    if (empty_)
      return p;
    auto take = [&](bool needed, size_t bytes) { return needed ? p.scratch.take(bytes) : nullptr; };
    for (unsigned i = 0; i < 2; ++i)
      p.buffers.in[i] = take(stageIn_[i], dataBytes(operandDims(i)));
    p.buffers.bias = take(stageBias_, biasBytes());
    p.buffers.padded = take(low_.explicitPad, dataBytes(low_.paddedX));
    p.buffers.workspace = take(choice_.workspace != 0, choice_.workspace);
    p.buffers.out = take(stageOut_, dataBytes(resultDims()));
    return p;
  }

  /// `v` in cuDNN's type and layout: itself, or its copy in `buffer`.
  llvm::Expected<const void *> stageIn(const TensorView &v, void *buffer, cudaStream_t s) {
    if (!buffer)
      return v.data;
    TensorView to = v;
    to.data = buffer;
    to.dtype = types_.data;
    to.layout = compute_;
    if (auto e = convertCounted(v, to, s))
      return e;
    return buffer;
  }

  /// The result from cuDNN's type and layout in the staged buffer into the output.
  llvm::Error stageOut(const TensorView &out, const void *buffer, cudaStream_t s) {
    if (!stageOut_)
      return llvm::Error::success();
    TensorView from = out;
    from.data = const_cast<void *>(buffer);
    from.dtype = types_.data;
    from.layout = compute_;
    return convertCounted(from, out, s);
  }

  llvm::Error convertCounted(const TensorView &from, const TensorView &to, cudaStream_t s) {
    if (from.layout != to.layout)
      countReorder(to.bytes());
    return convertTensor(from, to, s);
  }

  llvm::Error forward(KernelContext &ctx, const Buffers &b, const void *x, const void *w,
                      cudaStream_t s) {
    const CudnnApi &api = libs().cudnn;
    const float one = 1, zero = 0;
    if (b.padded) {
      GRAPHC_CUDA_TRY(launchPad(elemSize(), padIn_, elements(low_.paddedX), b.padded, x, s));
      x = b.padded;
    }
    void *y = b.out ? b.out : ctx.outputs[0].data;
    {
      std::lock_guard<std::mutex> lock(backend().handleMutex());
      GRAPHC_CUDNN_TRY(api, api.cudnnSetStream(backend().cudnn(), s));
      GRAPHC_CUDNN_TRY(
          api, api.cudnnConvolutionForward(backend().cudnn(), &one, xDesc_.get(), x, wDesc_.get(),
                                           w, conv_.get(), (cudnnConvolutionFwdAlgo_t)choice_.algo,
                                           b.workspace, choice_.workspace, &zero, yDesc_.get(), y));
    }
    if (bias_) {
      const void *bias = ctx.inputs[2].data;
      if (b.bias) {
        GRAPHC_CUDA_TRY(
            launchCast(ElemType::F32, elemType(types_.data), geo_.w[0], b.bias, bias, s));
        bias = b.bias;
      }
      GRAPHC_CUDA_TRY(launchBinary(BinaryOp::Add, elemType(types_.data), ElemParams(), biasIndex_,
                                   elements(geo_.y), y, y, bias, s));
    }
    return stageOut(ctx.outputs[0], y, s);
  }

  llvm::Error backwardData(KernelContext &ctx, const Buffers &b, const void *dy, const void *w,
                           cudaStream_t s) {
    const CudnnApi &api = libs().cudnn;
    const float one = 1, zero = 0;
    void *dx = b.out ? b.out : ctx.outputs[0].data;
    {
      std::lock_guard<std::mutex> lock(backend().handleMutex());
      GRAPHC_CUDNN_TRY(api, api.cudnnSetStream(backend().cudnn(), s));
      GRAPHC_CUDNN_TRY(api,
                       api.cudnnConvolutionBackwardData(
                           backend().cudnn(), &one, wDesc_.get(), w, yDesc_.get(), dy, conv_.get(),
                           (cudnnConvolutionBwdDataAlgo_t)choice_.algo, b.workspace,
                           choice_.workspace, &zero, xDesc_.get(), b.padded ? b.padded : dx));
    }
    if (b.padded)
      GRAPHC_CUDA_TRY(launchStridedCopy(elemSize(), cropOut_, elements(geo_.x), dx, b.padded, s));
    return stageOut(ctx.outputs[0], dx, s);
  }

  llvm::Error backwardFilter(KernelContext &ctx, const Buffers &b, const void *x, const void *dy,
                             cudaStream_t s) {
    const CudnnApi &api = libs().cudnn;
    const float one = 1, zero = 0;
    if (b.padded) {
      GRAPHC_CUDA_TRY(launchPad(elemSize(), padIn_, elements(low_.paddedX), b.padded, x, s));
      x = b.padded;
    }
    // An f32 filter gradient beside 16-bit data: computed narrow, widened.
    void *dw = b.out ? b.out : ctx.outputs[0].data;
    {
      std::lock_guard<std::mutex> lock(backend().handleMutex());
      GRAPHC_CUDNN_TRY(api, api.cudnnSetStream(backend().cudnn(), s));
      GRAPHC_CUDNN_TRY(api, api.cudnnConvolutionBackwardFilter(
                                backend().cudnn(), &one, xDesc_.get(), x, yDesc_.get(), dy,
                                conv_.get(), (cudnnConvolutionBwdFilterAlgo_t)choice_.algo,
                                b.workspace, choice_.workspace, &zero, wDesc_.get(), dw));
    }
    return stageOut(ctx.outputs[0], dw, s);
  }

  llvm::Error createDescriptors() {
    auto data = cudnnDataTypeOf(types_.data);
    if (!data)
      return data.takeError();
    const cudnnTensorFormat_t format = channelsLast() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    const CudnnApi &api = libs().cudnn;
    if (auto e = xDesc_.create(api, low_.paddedX, *data, format))
      return e;
    if (auto e = wDesc_.create(api, geo_.w, *data, format))
      return e;
    if (auto e = yDesc_.create(api, geo_.y, *data, format))
      return e;
    int64_t pads[2] = {low_.pad[0], low_.pad[1]};
    return conv_.create(api, pads, geo_.strides, geo_.dilations, geo_.group);
  }

  /// x zero-padded by the explicit part of the padding, in the layout cuDNN
  /// computes in.
  PadParams padParams() const {
    const bool last = channelsLast();
    Dims in = last ? channelsLastDims(geo_.x) : geo_.x;
    Dims out = last ? channelsLastDims(low_.paddedX) : low_.paddedX;
    PadParams p;
    p.rank = 4;
    p.mode = PadMode::Constant;
    Dims strides = plain::contiguousStrides(in);
    for (int d = 0; d < 4; ++d) {
      p.outDims[d] = out[d];
      p.inDims[d] = in[d];
      p.inStrides[d] = strides[d];
    }
    for (int i = 0; i < 2; ++i)
      p.before[last ? 1 + i : 2 + i] = low_.extraBegin[i];
    return p;
  }

  /// dx: the interior of the padded gradient.
  StridedIndex<1> cropIndex() const {
    const bool last = channelsLast();
    Dims padded = last ? channelsLastDims(low_.paddedX) : low_.paddedX;
    plain::LoopNest nest;
    nest.dims = last ? channelsLastDims(geo_.x) : geo_.x;
    nest.strides.push_back(plain::contiguousStrides(padded));
    int64_t first = low_.extraBegin[0] * low_.paddedX[3] + low_.extraBegin[1];
    nest.base.push_back(last ? first * geo_.x[1] : first);
    nest.collapse();
    StridedIndex<1> index;
    index.rank = (int)nest.dims.size();
    for (size_t d = 0; d < nest.dims.size(); ++d) {
      index.dims[d] = nest.dims[d];
      index.strides[0][d] = nest.strides[0][d];
    }
    index.base[0] = nest.base[0];
    return index;
  }

  /// cuDNN's idea of the output must be the graph's (a lowering check).
  llvm::Error checkOutputShape() {
    const CudnnApi &api = libs().cudnn;
    int n = 0, c = 0, h = 0, w = 0;
    GRAPHC_CUDNN_TRY(api, api.cudnnGetConvolution2dForwardOutputDim(conv_.get(), xDesc_.get(),
                                                                    wDesc_.get(), &n, &c, &h, &w));
    if (n != geo_.y[0] || c != geo_.y[1] || h != geo_.y[2] || w != geo_.y[3])
      return makeError("cuDNN computes output [" + llvm::Twine(n) + ", " + llvm::Twine(c) + ", " +
                       llvm::Twine(h) + ", " + llvm::Twine(w) + "], the graph says " +
                       shapeToString(geo_.y));
    return llvm::Error::success();
  }

  /// cuDNN's ranked answers for this shape and direction: its heuristics
  /// (Get*_v7), or with `measure` its timings (Find*, run under the handle's
  /// lock on the default stream).
  llvm::Error askCudnn(bool measure, std::vector<AlgoCandidate> &candidates,
                       std::vector<cudnnMathType_t> &maths) {
    const CudnnApi &api = libs().cudnn;
    cudnnHandle_t h = backend().cudnn();
    std::unique_lock<std::mutex> lock(backend().handleMutex(), std::defer_lock);
    if (measure) {
      lock.lock();
      GRAPHC_CUDNN_TRY(api, api.cudnnSetStream(h, nullptr));
    }
    int count = 0;
    switch (dir_) {
    case ConvDirection::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      auto ask = measure ? api.cudnnFindConvolutionForwardAlgorithm
                         : api.cudnnGetConvolutionForwardAlgorithm_v7;
      GRAPHC_CUDNN_TRY(api, ask(h, xDesc_.get(), wDesc_.get(), conv_.get(), yDesc_.get(),
                                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
      takeAnswers(perf, count, candidates, maths);
      break;
    }
    case ConvDirection::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      auto ask = measure ? api.cudnnFindConvolutionBackwardDataAlgorithm
                         : api.cudnnGetConvolutionBackwardDataAlgorithm_v7;
      GRAPHC_CUDNN_TRY(api, ask(h, wDesc_.get(), yDesc_.get(), conv_.get(), xDesc_.get(),
                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
      takeAnswers(perf, count, candidates, maths);
      break;
    }
    case ConvDirection::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      auto ask = measure ? api.cudnnFindConvolutionBackwardFilterAlgorithm
                         : api.cudnnGetConvolutionBackwardFilterAlgorithm_v7;
      GRAPHC_CUDNN_TRY(api, ask(h, xDesc_.get(), yDesc_.get(), conv_.get(), wDesc_.get(),
                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
      takeAnswers(perf, count, candidates, maths);
      break;
    }
    }
    return llvm::Error::success();
  }

  llvm::Error chooseAlgorithm() {
    // Tensor-core math: TF32 for f32 when allowed, always for f16 and bf16.
    ConvChoicePolicy policy;
    policy.data = types_.data;
    policy.allowTF32 = backend().allowTF32() || types_.data != DType::F32;
    policy.deterministic = backend().deterministic();
    policy.measured = backend().measureAlgorithms();
    policy.channelsLast = channelsLast();
    const size_t budget = backend().convWorkspaceBudget();
    ConvAlgorithmCache &cache = ConvAlgorithmCache::instance();
    std::string key = convCacheKey(backend().deviceContext(), geo_, dir_, policy);
    if (auto kept = cache.find(key); kept && kept->workspace <= budget)
      return take(*kept);
    // Ask under the math type we will allow, so the answers respect it.
    if (auto e = conv_.setMath(cudnnMath(convQueryMath(policy))))
      return e;
    std::vector<AlgoCandidate> candidates;
    std::vector<cudnnMathType_t> maths;
    // Find runs every algorithm on buffers it allocates; where it cannot
    // (device memory short), the heuristics answer instead, and that answer
    // is not kept in the file as a measured one.
    bool measured = policy.measured;
    if (measured)
      if (auto e = askCudnn(/*measure=*/true, candidates, maths)) {
        llvm::consumeError(std::move(e));
        candidates.clear();
        maths.clear();
        measured = false;
      }
    if (candidates.empty())
      if (auto e = askCudnn(/*measure=*/false, candidates, maths))
        return e;
    const bool tf32 = policy.allowTF32;
    auto chosen = chooseConvAlgorithm(candidates, budget, tf32, policy.deterministic);
    if (!chosen)
      return makeError("cuDNN offers no algorithm for this convolution within " +
                       llvm::Twine(budget >> 20) + " MiB of workspace" +
                       (tf32 ? "" : " without tensor-core math"));
    StoredAlgorithm c;
    c.algo = candidates[*chosen].algo;
    // Strict FP32 keeps FMA math whatever the answer said.
    c.math = tf32 ? maths[*chosen] : CUDNN_FMA_MATH;
    if (auto e = conv_.setMath((cudnnMathType_t)c.math))
      return e;
    auto bytes = workspaceSize(c.algo);
    if (!bytes)
      return bytes.takeError();
    c.workspace = std::max<uint64_t>(*bytes, candidates[*chosen].memory);
    return take(cache.add(key, c, /*persist=*/measured, budget));
  }

  /// The workspace `algo` needs under the descriptor's math type now (the
  /// answer's figure may be for another one).
  llvm::Expected<size_t> workspaceSize(int algo) {
    const CudnnApi &api = libs().cudnn;
    cudnnHandle_t h = backend().cudnn();
    size_t bytes = 0;
    switch (dir_) {
    case ConvDirection::Forward:
      GRAPHC_CUDNN_TRY(api, api.cudnnGetConvolutionForwardWorkspaceSize(
                                h, xDesc_.get(), wDesc_.get(), conv_.get(), yDesc_.get(),
                                (cudnnConvolutionFwdAlgo_t)algo, &bytes));
      break;
    case ConvDirection::BackwardData:
      GRAPHC_CUDNN_TRY(api, api.cudnnGetConvolutionBackwardDataWorkspaceSize(
                                h, wDesc_.get(), yDesc_.get(), conv_.get(), xDesc_.get(),
                                (cudnnConvolutionBwdDataAlgo_t)algo, &bytes));
      break;
    case ConvDirection::BackwardFilter:
      GRAPHC_CUDNN_TRY(api, api.cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                h, xDesc_.get(), yDesc_.get(), conv_.get(), wDesc_.get(),
                                (cudnnConvolutionBwdFilterAlgo_t)algo, &bytes));
      break;
    }
    return bytes;
  }

  /// Runs `c` from now on: the kept choice, which may be another thread's.
  llvm::Error take(const StoredAlgorithm &c) {
    choice_ = c;
    return conv_.setMath((cudnnMathType_t)c.math);
  }

  ConvDirection dir_ = ConvDirection::Forward;
  ConvGeometry geo_;
  ConvLowering low_;
  ConvTypes types_;
  Layout compute_ = Layout::Plain; ///< the layout cuDNN computes in
  bool empty_ = false, bias_ = false;
  bool stageIn_[2] = {false, false}, stageBias_ = false, stageOut_ = false;
  CudnnTensor xDesc_, yDesc_;
  CudnnFilter wDesc_;
  CudnnConvolution conv_;
  StoredAlgorithm choice_;
  PadParams padIn_;
  StridedIndex<1> cropOut_;
  StridedIndex<2> biasIndex_;
};

} // namespace

void registerCudaConvKernels(KernelRegistry &r) {
  for (Op op : {Op::Conv, Op::ConvGradData, Op::ConvGradFilter})
    r.add(op, DeviceKind::GPU, {DType::F32, DType::F16, DType::BF16}, cudaFactory<ConvKernel>());
}

} // namespace graphc
