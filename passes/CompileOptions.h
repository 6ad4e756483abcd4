//===- CompileOptions.h - Every knob the pass pipeline reads -----*- C++ -*-===//
//
// One struct of options, filled by the tools from their command lines and
// handed to every pass factory. Each field says which pass reads it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace graphc {

class Module;

struct CompileOptions {
  // bind-batch
  int64_t batch = 0; ///< global batch; 0 keeps the module's own

  // add-loss
  double auxLossWeight = 0.4; ///< weight of an auxiliary head's loss (inception_v3)

  // add-optimizer
  std::string optimizer = "momentum"; ///< sgd | momentum | rmsprop | adam
  double learningRate = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double weightDecay = 0.0;
  double rmspropDecay = 0.9, rmspropMomentum = 0.9, rmspropEpsilon = 1.0;
  double adamBeta1 = 0.9, adamBeta2 = 0.999, adamEpsilon = 1e-8;

  // training-mode
  double dropoutSeedSalt = 0;

  // replicate-towers, split-batch, aggregate-gradients, place-devices
  int towers = 1; ///< GPU towers gpu:0..N-1; 0: none (the single-device graph)
  std::string bnMode = "local";        ///< local | sync | frozen
  std::string remainder = "uneven";    ///< error | drop | uneven
  std::vector<double> splitWeights;    ///< per-device batch weights (--split 4,4,2)
  std::string params = "cpu";          ///< cpu | gpu:K | spread | mirrored
  int64_t bucketBytes = 25 << 20;      ///< all-reduce bucket cap (mirrored)

  // place-devices: assigns every node a device. Passes may not depend on
  // placement/, so the tools build this from the cluster and the kernel
  // registry (placement/Placer.h: makePlacerFunction). Unset: place-devices
  // fails and says so.
  std::function<llvm::Error(Module &)> placer;

  uint64_t seed = 0;
};

} // namespace graphc
