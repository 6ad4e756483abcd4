//===- InferInputs.h - What `graphrun infer --input` reads --------*- C++ -*-===//
//
// The files given to --input, in order, feed the model's graph inputs:
//
//  - `.npy`: one array, for the next graph input;
//  - `.npz`: an array for each graph input named after it, or, for a model
//    of one input, the array `x` (else `x_test`, else its only array);
//  - `.jpg`, `.jpeg`, `.png`: consecutive image files are one batch for the
//    next graph input, which must be an image input ([N, C, H, W] or
//    [N, H, W, C], C = 3, or 1 for grey, mixed as the data loader mixes);
//    each is loaded as images:DIR loads it (resized to H × W, normalised
//    with ImageNet's statistics).
//
// Arrays convert to the input's element type the way npz data does (integers
// to f32 for a float input; a float array for an integer input is refused).
// Every input must have the same batch (axis 0). Errors name the file and
// what the input expects.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "ir/Tensor.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace graphc {

/// Whether every path is an .npy file (whose batch is known before the model).
bool allNpy(llvm::ArrayRef<std::string> paths);

/// The tensors `paths` feed to `inputs` (the forward model's graph inputs,
/// their batch not necessarily bound), one per input, in order.
llvm::Expected<std::vector<Tensor>> readInferInputs(llvm::ArrayRef<std::string> paths,
                                                    llvm::ArrayRef<Node *> inputs);

} // namespace graphc
