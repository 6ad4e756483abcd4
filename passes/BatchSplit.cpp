//===- BatchSplit.cpp - Cutting the global batch into towers --------------===//
//
// One rule for every policy: a share is "exact" when B·w_t/Σw is an integer
// for every tower; error and drop insist on exact shares (drop lowers B until
// they are), uneven apportions by largest remainders. Equal weights make that
// the usual "first B mod N towers get one more".
//
//===----------------------------------------------------------------------===//

#include "passes/BatchSplit.h"

#include "ir/AttributeText.h"
#include "ir/Diagnostics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace graphc {
namespace {

using Sizes = llvm::SmallVector<int64_t, 8>;

std::string joined(llvm::ArrayRef<int64_t> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s.append(i ? "," : "").append(std::to_string(v[i]));
  return s;
}

std::string joined(llvm::ArrayRef<double> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s.append(i ? "," : "")
        .append(v[i] == std::floor(v[i]) && std::abs(v[i]) < 1e15 ? std::to_string((int64_t)v[i])
                                                                  : formatDouble(v[i]));
  return s;
}

/// Largest-remainder apportionment of `batch` by `weights` (ties to the lower
/// tower).
Sizes apportion(int64_t batch, llvm::ArrayRef<double> weights) {
  double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  Sizes sizes(weights.size());
  std::vector<std::pair<double, size_t>> fractions;
  int64_t given = 0;
  for (size_t t = 0; t < weights.size(); ++t) {
    double share = (double)batch * weights[t] / total;
    // Shares within rounding of an integer are that integer.
    double whole = std::floor(share + 1e-9);
    sizes[t] = (int64_t)whole;
    given += sizes[t];
    fractions.emplace_back(std::max(0.0, share - whole), t);
  }
  std::stable_sort(fractions.begin(), fractions.end(),
                   [](const auto &a, const auto &b) { return a.first > b.first; });
  for (size_t i = 0; given < batch; ++i, ++given)
    ++sizes[fractions[i % fractions.size()].second];
  return sizes;
}

/// The shares when every one is an integer.
std::optional<Sizes> exactShares(int64_t batch, llvm::ArrayRef<double> weights) {
  double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  Sizes sizes;
  for (double w : weights) {
    double share = (double)batch * w / total;
    double rounded = std::round(share);
    if (std::abs(share - rounded) > 1e-9 * std::max(1.0, share))
      return std::nullopt;
    sizes.push_back((int64_t)rounded);
  }
  return sizes;
}

std::optional<int64_t> largestExactBatch(int64_t batch, llvm::ArrayRef<double> weights) {
  for (int64_t b = batch; b > 0; --b)
    if (exactShares(b, weights))
      return b;
  return std::nullopt;
}

} // namespace

llvm::Expected<BatchSplit> planBatchSplit(int64_t batch, const TowerOptions &opts) {
  int towers = opts.towers;
  if (towers < 1)
    return makeError("--towers must be at least 1, got " + llvm::Twine(towers));
  if (batch < 1)
    return makeError("the global batch must be at least 1, got " + llvm::Twine(batch));
  std::vector<double> weights(towers, 1.0);
  if (opts.split.kind == SplitSpec::Auto)
    return makeError(
        "--split auto shares the batch by the speeds of the towers' devices, which "
        "come from the cluster: give --cluster FILE (or --gpus N) to place the towers");
  const std::vector<double> &given = opts.split.weights;
  bool weighted = opts.split.kind == SplitSpec::Weights;
  if (weighted) {
    if ((int)given.size() != towers)
      return makeError("--split gives " + llvm::Twine(given.size()) + " weights for " +
                       llvm::Twine(towers) + " towers");
    double total = 0;
    for (double w : given) {
      if (!(w >= 0) || !std::isfinite(w))
        return makeError("--split weights must be finite and non-negative, got " + joined(given));
      total += w;
    }
    if (total <= 0)
      return makeError("--split weights must not all be zero");
    weights = given;
  }
  RemainderPolicy policy = opts.remainder;

  BatchSplit split;
  if (policy == RemainderPolicy::Uneven) {
    split.sizes = apportion(batch, weights);
  } else if (auto exact = exactShares(batch, weights)) {
    split.sizes = *exact;
  } else if (policy == RemainderPolicy::Drop && largestExactBatch(batch, weights)) {
    split.sizes = *exactShares(*largestExactBatch(batch, weights), weights);
  } else {
    llvm::Twine what =
        batch < towers && !weighted ? " is smaller than the " : " does not split evenly over ";
    std::string weightText = weighted ? " with weights " + joined(weights) : std::string();
    std::optional<int64_t> dropped = largestExactBatch(batch, weights);
    std::string dropDoes = dropped ? "a global batch of " + std::to_string(*dropped)
                                   : std::string("impossible: no sample would be left");
    return makeError("the global batch of " + llvm::Twine(batch) + what + llvm::Twine(towers) +
                     " towers" + weightText + " (--remainder " + modeName(policy) +
                     "); the remainder policies are error (refuse), drop (" + dropDoes +
                     ") and uneven (tower batches " + joined(apportion(batch, weights)) + ")");
  }
  split.global = std::accumulate(split.sizes.begin(), split.sizes.end(), int64_t(0));
  return split;
}

} // namespace graphc
