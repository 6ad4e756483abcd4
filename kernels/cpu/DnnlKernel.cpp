//===- DnnlKernel.cpp - What the oneDNN-backed kernels share ----------------===//
//
// See DnnlKernel.h: thread scope, staging through scratch, the base class
// that turns oneDNN exceptions into errors and checks scratch use.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/DnnlKernel.h"

#include "ir/MemoryLimit.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"

#include <cstring>
#include <omp.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdexcept>

namespace graphc {

ThreadScope::ThreadScope(int threads) : saved_(omp_get_max_threads()) {
  if (threads > 0 && threads != saved_)
    omp_set_num_threads(threads);
}

ThreadScope::~ThreadScope() {
  if (omp_get_max_threads() != saved_)
    omp_set_num_threads(saved_);
}

dnnl::memory::desc plainDesc(llvm::ArrayRef<int64_t> dims, DType dtype) {
  dnnl::memory::dims d(dims.begin(), dims.end());
  if (d.empty())
    d.push_back(1);
  dnnl::memory::dims strides(d.size());
  int64_t stride = 1;
  for (size_t i = d.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= d[i];
  }
  return dnnl::memory::desc(d, dnnlType(dtype), strides);
}

dnnl::memory::desc layoutDesc(const TensorType &t, Layout l) {
  if (l != Layout::Plain)
    return dnnlDesc(t, l);
  return plainDesc(t.shape, t.dtype);
}

dnnl::reorder &ReorderCache::get(const dnnl::memory::desc &from, const dnnl::memory::desc &to) {
  for (Entry &e : entries_)
    if (e.from == from && e.to == to)
      return e.prim;
  const dnnl::engine &eng = CpuBackend::instance().engine();
  dnnl::reorder::primitive_desc pd(eng, from, eng, to);
  entries_.push_back({from, to, dnnl::reorder(pd)});
  return entries_.back().prim;
}

void PrimitiveLog::note(const dnnl::primitive &p) {
  const_dnnl_primitive_t handle = p.get();
  if (llvm::is_contained(seen_, handle))
    return;
  seen_.push_back(handle);
  const_dnnl_primitive_desc_t pd = p.get_primitive_desc();
  const char *impl = nullptr;
  dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
  note(PrimitiveInfo{dnnl_prim_kind2str(kind), impl ? impl : "?"});
}

void PrimitiveLog::note(PrimitiveInfo info) {
  for (const PrimitiveInfo &e : entries_)
    if (e.kind == info.kind && e.implementation == info.implementation)
      return;
  entries_.push_back(std::move(info));
}

void *Staging::take(size_t bytes) {
  bytes = roundScratch(bytes);
  if (used_ + bytes > capacity_)
    throw std::runtime_error("needs more scratch memory than scratchBytes() reported (" +
                             std::to_string(used_ + bytes) + " > " + std::to_string(capacity_) +
                             "); were the layouts changed after prepare()?");
  void *p = base_ + used_;
  used_ += bytes;
  return p;
}

dnnl::memory Staging::read(void *data, const dnnl::memory::desc &have,
                           const dnnl::memory::desc &want) {
  dnnl::memory view(have, engine(), data);
  if (have == want)
    return view;
  dnnl::memory staged(want, engine(), take(want.get_size()));
  log_.countReorder(want.get_size());
  execute(reorders_.get(have, want), {{DNNL_ARG_FROM, view}, {DNNL_ARG_TO, staged}});
  return staged;
}

void Staging::reorderInto(void *data, const dnnl::memory::desc &have, dnnl::memory &to) {
  dnnl::memory view(have, engine(), data);
  log_.countReorder(to.get_desc().get_size());
  execute(reorders_.get(have, to.get_desc()), {{DNNL_ARG_FROM, view}, {DNNL_ARG_TO, to}});
}

KeptOperand::~KeptOperand() {
  releaseHostBytes(bytes_);
}

bool KeptOperand::isStable(const Node &node, unsigned i) {
  Op op = node.operand(i)->producer()->op();
  return op == Op::Variable || op == Op::Constant;
}

llvm::Expected<dnnl::memory> KeptOperand::get(Staging &s, void *data,
                                              const dnnl::memory::desc &have,
                                              const dnnl::memory::desc &want, uint64_t version) {
  if (version == 0 || have == want)
    return s.read(data, have, want);
  return keep(
      data, want, version, [&](dnnl::memory &to) { s.reorderInto(data, have, to); },
      "weights kept in the layout a primitive wants");
}

llvm::Expected<dnnl::memory> KeptOperand::keep(const void *data, const dnnl::memory::desc &want,
                                               uint64_t version,
                                               llvm::function_ref<void(dnnl::memory &)> fill,
                                               const char *what) {
  if (!kept_) {
    int64_t bytes = (int64_t)want.get_size();
    if (auto e = reserveHostBytes(bytes, what))
      return e;
    bytes_ = bytes;
    kept_ = dnnl::memory(want, CpuBackend::instance().engine());
  }
  if (version != version_ || data != from_) {
    fill(kept_);
    version_ = version;
    from_ = data;
  }
  return kept_;
}

dnnl::memory Staging::write(void *data, const dnnl::memory::desc &have,
                            const dnnl::memory::desc &want) {
  dnnl::memory view(have, engine(), data);
  if (have == want)
    return view;
  dnnl::memory staged(want, engine(), take(want.get_size()));
  pending_.push_back({staged, view});
  return staged;
}

dnnl::memory Staging::temp(const dnnl::memory::desc &d) {
  return dnnl::memory(d, engine(), take(d.get_size()));
}

void Staging::finish() {
  for (Pending &p : pending_) {
    log_.countReorder(p.to.get_desc().get_size());
    execute(reorders_.get(p.from.get_desc(), p.to.get_desc()),
            {{DNNL_ARG_FROM, p.from}, {DNNL_ARG_TO, p.to}});
  }
  pending_.clear();
  stream_.wait();
}

void Staging::execute(const dnnl::primitive &p, const std::unordered_map<int, dnnl::memory> &args) {
  log_.note(p);
  p.execute(stream_, args);
}

DnnlKernel::DnnlKernel(const Node &n, const KernelEnv &env)
    : node_(&n), threads_(env.threads > 0 ? env.threads : 1), cpuLayout_(env.cpuLayout),
      altIn_(n.numOperands()), altOut_(n.numResults()), preferIn_(n.numOperands()),
      preferOut_(n.numResults()) {}

void DnnlKernel::allowActivationOperand(unsigned i) {
  altIn_[i] = activationLayout(operandType(i));
}

void DnnlKernel::allowActivationResult(unsigned i) {
  altOut_[i] = activationLayout(resultType(i));
}

/// Which of our layouts a format oneDNN chose for a value of type `t` is
/// (plain, or `alt` where the value may take it).
static std::optional<Layout> layoutOf(const TensorType &t, const dnnl::memory::desc &chosen,
                                      std::optional<Layout> alt) {
  if (chosen == plainDesc(t.shape, t.dtype))
    return Layout::Plain;
  if (alt && chosen == layoutDesc(t, *alt))
    return alt;
  return std::nullopt;
}

void DnnlKernel::allowActivationOperand(unsigned i, const dnnl::memory::desc &chosen) {
  allowActivationOperand(i);
  preferIn_[i] = layoutOf(operandType(i), chosen, altIn_[i]);
}

void DnnlKernel::allowActivationResult(unsigned i, const dnnl::memory::desc &chosen) {
  allowActivationResult(i);
  preferOut_[i] = layoutOf(resultType(i), chosen, altOut_[i]);
}

bool DnnlKernel::acceptsLayout(unsigned i, Layout l) const {
  return l == Layout::Plain || (i < altIn_.size() && altIn_[i] == l);
}

bool DnnlKernel::producesLayout(unsigned i, Layout l) const {
  return l == Layout::Plain || (i < altOut_.size() && altOut_[i] == l);
}

dnnl::primitive_attr DnnlKernel::userScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

llvm::Error DnnlKernel::guard(llvm::function_ref<llvm::Error()> body) {
  ThreadScope threads(threads_);
  try {
    return body();
  } catch (const dnnl::error &e) {
    return nodeError(*node_, llvm::Twine("oneDNN: ") + e.what());
  } catch (const std::exception &e) {
    return nodeError(*node_, e.what());
  }
}

llvm::Error DnnlKernel::init() {
  for (const Value *v : node_->operands())
    if (!v->type().isStatic())
      return nodeError(*node_, "operand '" + v->name() + "' has a symbolic shape; bind the batch");
  for (const auto &v : node_->results())
    if (!v->type().isStatic())
      return nodeError(*node_, "result '" + v->name() + "' has a symbolic shape; bind the batch");
  for (const Value *v : node_->operands())
    empty_ |= v->type().numElements() == 0;
  for (const auto &v : node_->results())
    empty_ |= v->type().numElements() == 0;
  return guard([&] { return empty_ ? buildEmpty() : build(); });
}

void DnnlKernel::executeEmpty(KernelContext &ctx) {
  for (const TensorView &v : ctx.outputs)
    if (v.bytes())
      std::memset(v.data, 0, v.bytes());
}

std::vector<Layouts> DnnlKernel::allLayouts() const {
  std::vector<Layouts> all(1);
  auto expand = [&](auto member, std::optional<Layout> alt) {
    size_t n = all.size();
    for (size_t k = 0; k < n; ++k) {
      (all[k].*member).push_back(Layout::Plain);
      if (alt) {
        Layouts b = all[k];
        (b.*member).back() = *alt;
        all.push_back(std::move(b));
      }
    }
  };
  for (std::optional<Layout> l : altIn_)
    expand(&Layouts::in, l);
  for (std::optional<Layout> l : altOut_)
    expand(&Layouts::out, l);
  return all;
}

llvm::Error DnnlKernel::prepare(llvm::ArrayRef<Layout> operands, llvm::ArrayRef<Layout> results) {
  if (operands.size() != altIn_.size() || results.size() != altOut_.size())
    return nodeError(*node_, "prepare() got " + llvm::Twine(operands.size()) + " operand and " +
                                 llvm::Twine(results.size()) + " result layouts");
  Layouts ls;
  ls.in.assign(operands.begin(), operands.end());
  ls.out.assign(results.begin(), results.end());
  for (unsigned i = 0; i < ls.in.size(); ++i)
    if (!acceptsLayout(i, ls.in[i]))
      return nodeError(*node_, "operand " + llvm::Twine(i) + " cannot be " + layoutName(ls.in[i]));
  for (unsigned i = 0; i < ls.out.size(); ++i)
    if (!producesLayout(i, ls.out[i]))
      return nodeError(*node_, "result " + llvm::Twine(i) + " cannot be " + layoutName(ls.out[i]));
  return guard([&] {
    if (!empty_)
      prepareFor(ls);
    prepared_ = std::move(ls);
    scratch_.reset();
    return llvm::Error::success();
  });
}

size_t DnnlKernel::scratchBytes() const {
  if (scratch_)
    return *scratch_;
  if (empty_) {
    scratch_ = 0;
  } else if (prepared_) {
    scratch_ = scratchFor(*prepared_);
  } else {
    size_t most = 0;
    for (const Layouts &ls : allLayouts())
      most = std::max(most, scratchFor(ls));
    scratch_ = most;
  }
  return *scratch_;
}

llvm::Error DnnlKernel::run(KernelContext &ctx) {
  assert(ctx.inputs.size() == altIn_.size() && ctx.outputs.size() == altOut_.size());
  for (unsigned i = 0; i < ctx.inputs.size(); ++i)
    if (!acceptsLayout(i, ctx.inputs[i].layout))
      return nodeError(*node_, "operand " + llvm::Twine(i) + " arrived " +
                                   layoutName(ctx.inputs[i].layout));
  for (unsigned i = 0; i < ctx.outputs.size(); ++i)
    if (!producesLayout(i, ctx.outputs[i].layout))
      return nodeError(*node_, "result " + llvm::Twine(i) + " was asked for " +
                                   layoutName(ctx.outputs[i].layout));
  size_t capacity = scratchBytes();
  return guard([&] {
    if (empty_) {
      executeEmpty(ctx);
      return llvm::Error::success();
    }
    Staging s(ctx.scratch, capacity, reorders_, cpuStream(ctx), log_);
    execute(ctx, s);
    s.finish();
    return llvm::Error::success();
  });
}

} // namespace graphc
