//===- DotView.h - Graphviz DOT and SVG of a placed graph -------*- C++ -*-===//
//
// writeDot() draws every graph of a module for Graphviz: nodes filled with
// their assigned device's colour and a legend of the devices, towers and name
// scopes as nested clusters (ViewTree.h), edges that cross devices thick and
// red. Each node's tooltip holds its op, types, requested and assigned device
// and placement reason (SVG viewers show it on hover). The signature is
// PassManager::DotWriter's, so `--dump-dir` can write .dot files with it.
//
// renderSvg() runs Graphviz's `dot` when it is installed and says clearly
// when it is not. Large graphs take Graphviz a long time; the HTML view
// (HtmlView.h) is the one meant for them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace graphc {

void writeDot(const Module &m, llvm::raw_ostream &os);
std::string toDot(const Module &m);

/// SVG of a DOT text by `dot -Tsvg`; an error when Graphviz is missing or
/// fails. `timeoutSeconds` 0 waits as long as it takes.
llvm::Expected<std::string> renderSvg(llvm::StringRef dot, unsigned timeoutSeconds = 0);

} // namespace graphc
