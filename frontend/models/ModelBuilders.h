//===- ModelBuilders.h - One builder function per model family --*- C++ -*-===//
//
// Internal to frontend/models: the registry (Models.cpp) resolves defaults and
// checks options, then calls one of these on an empty module. A builder adds
// the input, layers and outputs through the NetBuilder; shape errors stay in
// the NetBuilder (sticky) for the registry to report.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/models/ModelOptions.h"
#include "frontend/models/NetBuilder.h"

namespace graphc::models {

void buildInceptionV3(NetBuilder &nb, const ModelOptions &o);
void buildResNet18(NetBuilder &nb, const ModelOptions &o);
void buildResNet50(NetBuilder &nb, const ModelOptions &o);
void buildSmallCnn(NetBuilder &nb, const ModelOptions &o);
void buildSmallCnnNoBn(NetBuilder &nb, const ModelOptions &o);
void buildMlp(NetBuilder &nb, const ModelOptions &o);

} // namespace graphc::models
