//===- HtmlView.h - A self-contained page to explore a graph ----*- C++ -*-===//
//
// writeHtmlView() writes one HTML file that works offline: the graph as JSON
// and the page's own script and styles inline, nothing fetched. The page
// (placement/html/view.js) shows towers and name scopes (ViewTree.h) as
// boxes, collapsed at first, that open on a click; nodes coloured by assigned
// device with a legend; edges that cross devices in red; pan and zoom; a
// search by node name; and, for a clicked node, its op, types, inputs and
// consumers, device, requested device and placement reason. Collapsing is
// what keeps inception_v3 with four towers (~20k nodes) usable: the page only
// lays out what is visible. Given a run's metrics and trace (RunView.h), the
// page also shows the loss curve and each device's busy time beside the graph.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"
#include "placement/RunView.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

/// `metrics` and `trace` (either may be null) are a run of `m`, checked with
/// checkRunMatchesPlan.
void writeHtmlView(const Module &m, llvm::raw_ostream &os, const RunMetrics *metrics = nullptr,
                   const RunTrace *trace = nullptr);

/// The JSON the page reads (for tests and other front ends): module, meta,
/// devices [[name, colour]], graphs [{name, clusters, nodes}] and, with a
/// run, run {metrics, trace}, as documented at the top of view.js.
std::string htmlViewData(const Module &m, const RunMetrics *metrics = nullptr,
                         const RunTrace *trace = nullptr);

} // namespace graphc
