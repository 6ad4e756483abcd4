//===- PsClient.cpp - A worker's side of the parameter servers ------------===//

#include "executor/dist/PsClient.h"

#include "executor/dist/PsProtocol.h"
#include "ir/Diagnostics.h"

#include <algorithm>
#include <cstring>

namespace graphc {

PsClient::PsClient(MessageChannel &channel, PsLayout layout)
    : channel_(channel), layout_(std::move(layout)), read_(layout_.tasks(), 0) {
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    requests_.push_back(psMessage(layout_.values(p)));
    replies_.push_back(psMessage(layout_.stateValues(p)));
  }
}

llvm::Error PsClient::packRequests(int64_t step, double lr, llvm::ArrayRef<Tensor> outputs) {
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    PsHeader h;
    h.kind = (uint32_t)PsKind::Grads;
    h.worker = channel_.rank();
    h.step = step;
    h.lr = lr;
    h.version = read_[p];
    setPsHeader(requests_[p], h);
    float *to = psValuesOf(requests_[p]);
    for (const PsRoute *r : layout_.of(p)) {
      if (r->output >= outputs.size() || outputs[r->output].type() != r->type)
        return makeError("the step's output " + llvm::Twine(r->output) + " is not the sum for '" +
                         r->var + "' (" + toString(r->type) + ")");
      std::memcpy(to, outputs[r->output].raw(), outputs[r->output].bytes());
      to += r->type.numElements();
    }
    if (auto e = checkPsMessageSize(requests_[p].size(), p))
      return e;
  }
  return llvm::Error::success();
}

llvm::Expected<uint64_t> PsClient::readVariables(unsigned p, size_t received, int64_t step,
                                                 Executor &ex) {
  PsHeader h = psHeaderOf(replies_[p]);
  size_t want = sizeof(PsHeader) + (size_t)layout_.values(p) * sizeof(float);
  if (h.kind != (uint32_t)PsKind::Vars || received != want)
    return makeError(psTaskName(channel_, p) + " answered the gradients of step " +
                     llvm::Twine(step) + " with " + psKindName(h.kind) + " of " +
                     llvm::Twine((uint64_t)received) + " bytes");
  read_[p] = h.version;
  const float *from = psValuesOf(replies_[p]);
  for (const PsRoute *r : layout_.of(p)) {
    Tensor t(r->type);
    std::memcpy(t.raw(), from, t.bytes());
    from += r->type.numElements();
    if (auto e = ex.writeVariable(r->var, t))
      return e;
  }
  return h.staleness;
}

llvm::Expected<uint64_t> PsClient::exchange(int64_t step, double lr, llvm::ArrayRef<Tensor> outputs,
                                            Executor &ex) {
  if (auto e = packRequests(step, lr, outputs))
    return e;
  std::vector<Message> sends, receives;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    sends.push_back({taskRank(p), kPsRequestTag, requests_[p].data(), requests_[p].size()});
    receives.push_back({taskRank(p), kPsReplyTag, replies_[p].data(), replies_[p].size()});
  }
  if (auto e = channel_.exchange(sends, receives,
                                 "sending the step's gradients to the ps tasks and receiving the "
                                 "variables"))
    return e;
  uint64_t staleness = 0;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    auto s = readVariables(p, receives[p].received, step, ex);
    if (!s)
      return s.takeError();
    staleness = std::max(staleness, *s);
  }
  return staleness;
}

/// Reads a task's state message into named tensors.
static void appendState(const PsLayout &layout, unsigned task, const std::vector<char> &reply,
                        std::vector<NamedTensor> &out) {
  const float *from = psValuesOf(reply);
  for (const PsRoute *r : layout.of(task)) {
    std::vector<std::string> names{r->var};
    names.insert(names.end(), r->slots.begin(), r->slots.end());
    for (const std::string &name : names) {
      Tensor t(r->type);
      std::memcpy(t.raw(), from, t.bytes());
      from += r->type.numElements();
      out.push_back({name, std::move(t)});
    }
  }
}

llvm::Expected<std::vector<NamedTensor>> PsClient::state() {
  std::vector<PsHeader> asks(layout_.tasks());
  std::vector<Message> sends, receives;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    asks[p].kind = (uint32_t)PsKind::Save;
    asks[p].worker = channel_.rank();
    sends.push_back({taskRank(p), kPsRequestTag, &asks[p], sizeof(PsHeader)});
    receives.push_back({taskRank(p), kPsReplyTag, replies_[p].data(), replies_[p].size()});
  }
  if (auto e = channel_.exchange(sends, receives, "gathering the ps tasks' variables"))
    return e;
  std::vector<NamedTensor> out;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    PsHeader h = psHeaderOf(replies_[p]);
    if (h.kind != (uint32_t)PsKind::State || receives[p].received != replies_[p].size())
      return makeError(psTaskName(channel_, p) + " answered a state request with " +
                       psKindName(h.kind));
    appendState(layout_, p, replies_[p], out);
  }
  return out;
}

llvm::Error PsClient::tell(PsKind kind, llvm::StringRef what) {
  std::vector<PsHeader> notes(layout_.tasks());
  std::vector<Message> sends;
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    notes[p].kind = (uint32_t)kind;
    notes[p].worker = channel_.rank();
    sends.push_back({taskRank(p), kPsRequestTag, &notes[p], sizeof(PsHeader)});
  }
  return channel_.exchange(sends, {}, what);
}

llvm::Error PsClient::away() {
  return tell(PsKind::Away, "telling the ps tasks this worker is away");
}

llvm::Error PsClient::finish(bool final, std::vector<NamedTensor> *state,
                             std::vector<PsTaskStats> *stats) {
  if (auto e = tell(final ? PsKind::DoneFinal : PsKind::Done,
                    "telling the ps tasks this worker is done"))
    return e;
  if (!final)
    return llvm::Error::success();
  // Each task answers once every worker is done; until then a note after each
  // update it applies keeps this wait's deadline moving.
  for (unsigned p = 0; p < layout_.tasks(); ++p) {
    for (;;) {
      Message reply{taskRank(p), kPsReplyTag, replies_[p].data(), replies_[p].size()};
      if (auto e = channel_.exchange({}, reply,
                                     "waiting for every worker to finish (" +
                                         psTaskName(channel_, p) + "'s final state)"))
        return e;
      PsHeader h = psHeaderOf(replies_[p]);
      if (h.kind == (uint32_t)PsKind::Note)
        continue;
      if (h.kind != (uint32_t)PsKind::State || reply.received != replies_[p].size())
        return makeError(psTaskName(channel_, p) + " ended the run with " + psKindName(h.kind));
      if (state)
        appendState(layout_, p, replies_[p], *state);
      if (stats)
        stats->push_back({h.updates, h.staleness, h.meanStaleness});
      break;
    }
  }
  return llvm::Error::success();
}

} // namespace graphc
