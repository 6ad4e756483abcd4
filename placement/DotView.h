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
// when it is not. Graphviz's layout time grows far faster than the graph:
// svgOf() refuses a module of more than kSvgMaxNodes nodes in one line that
// points to the HTML view (HtmlView.h), which is meant for any size.
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
/// fails, and one with the code std::errc::timed_out when it runs longer
/// than `timeoutSeconds` (0 waits as long as it takes).
llvm::Expected<std::string> renderSvg(llvm::StringRef dot, unsigned timeoutSeconds = 0);

/// The most nodes svgOf() lays out, and how long it lets Graphviz take. On
/// a 2-core AMD EPYC (Zen 4): small_cnn on 8 GPUs, 940 nodes, 0.27 s;
/// resnet18 on one GPU, 909 nodes, 29 s; on two, 1,766 nodes, over 200 s.
inline constexpr size_t kSvgMaxNodes = 1000;
inline constexpr unsigned kSvgTimeoutSeconds = 120;

/// The SVG of `m` (every graph): refused above kSvgMaxNodes nodes, and an
/// error when Graphviz takes longer than kSvgTimeoutSeconds.
llvm::Expected<std::string> svgOf(const Module &m);

} // namespace graphc
