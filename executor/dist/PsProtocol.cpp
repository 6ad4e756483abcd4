//===- PsProtocol.cpp - The messages of the parameter-server protocol -----===//

#include "executor/dist/PsProtocol.h"

#include "ir/Diagnostics.h"

#include <cstring>

namespace graphc {

const char *psKindName(uint32_t k) {
  switch ((PsKind)k) {
  case PsKind::Grads:
    return "gradients";
  case PsKind::Save:
    return "a state request";
  case PsKind::Done:
  case PsKind::DoneFinal:
    return "its end";
  case PsKind::Vars:
    return "variables";
  case PsKind::State:
    return "a state";
  case PsKind::Note:
    return "a note";
  case PsKind::Away:
    return "a note that it is away";
  }
  return "an unknown message";
}

std::vector<char> psMessage(int64_t values) {
  return std::vector<char>(sizeof(PsHeader) + (size_t)values * sizeof(float));
}

PsHeader psHeaderOf(const std::vector<char> &m) {
  PsHeader h;
  std::memcpy(&h, m.data(), sizeof h);
  return h;
}

void setPsHeader(std::vector<char> &m, const PsHeader &h) {
  std::memcpy(m.data(), &h, sizeof h);
}

float *psValuesOf(std::vector<char> &m) {
  return reinterpret_cast<float *>(m.data() + sizeof(PsHeader));
}

const float *psValuesOf(const std::vector<char> &m) {
  return reinterpret_cast<const float *>(m.data() + sizeof(PsHeader));
}

llvm::Error checkPsMessageSize(size_t bytes, unsigned task) {
  if (bytes > (size_t)INT32_MAX)
    return makeError("ps task " + llvm::Twine(task) + " holds " + llvm::Twine((uint64_t)bytes) +
                     " bytes, more than one MPI message carries (2 GiB): use more ps tasks");
  return llvm::Error::success();
}

std::string psTaskName(const MessageChannel &channel, unsigned task) {
  return "ps task " + std::to_string(task) + " (rank " +
         std::to_string(channel.numWorkers() + task) + ")";
}

} // namespace graphc
