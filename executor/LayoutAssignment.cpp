//===- LayoutAssignment.cpp - Which layout each value is kept in ----------===//

#include "executor/LayoutAssignment.h"

#include "llvm/ADT/STLExtras.h"

#include <functional>
#include <optional>

namespace graphc {
namespace {

class Assignment {
public:
  Assignment(llvm::ArrayRef<LayoutSite> sites, const LayoutOptions &options)
      : sites_(sites), options_(options) {
    for (const LayoutSite &s : sites)
      index_[s.node] = &s - sites.data();
  }

  llvm::DenseMap<const Value *, Layout> run() {
    tieGroups();
    struct Group {
      std::optional<Layout> layout; ///< the members' candidate; unset until the first
      bool ok = true;
      int64_t vote = 0;
    };
    llvm::DenseMap<const Value *, Group> groups;
    std::vector<const Value *> all;
    for (const LayoutSite &s : sites_)
      for (auto &r : s.node->results()) {
        const Value *v = r.get();
        all.push_back(v);
        Group &g = groups[find(v)];
        std::optional<Layout> l = candidate(v);
        if (!g.layout)
          g.layout = l;
        g.ok = g.ok && l && *l == *g.layout && keepable(v, *l);
        if (g.ok)
          g.vote += vote(v, *l);
      }
    // Operands tied in by a follower but made elsewhere (inputs, variables)
    // are results too, so every member was seen above.
    llvm::DenseMap<const Value *, Layout> layouts;
    for (const Value *v : all) {
      const Group &g = groups[find(v)];
      if (g.ok && g.layout && g.vote >= 0)
        layouts[v] = *g.layout;
    }
    return layouts;
  }

private:
  const LayoutSite &siteOf(const Node *n) const { return sites_[index_.lookup(n)]; }

  /// The layout besides plain that `v` could take on its device.
  std::optional<Layout> candidate(const Value *v) const {
    const LayoutSite &p = siteOf(v->producer());
    switch (p.kind) {
    case DeviceKind::CPU:
      if (!options_.blocked)
        return std::nullopt;
      if (channelsLastShape(v->type()) &&
          channelsLastOnCpu(options_.cpu, v->type().dtype, options_.cpuHasAmx))
        return Layout::ChannelsLast;
      return Layout::Blocked;
    case DeviceKind::GPU:
      if (channelsLastShape(v->type()) && channelsLastFor(options_.gpu, v->type().dtype))
        return Layout::ChannelsLast;
      return std::nullopt;
    }
    return std::nullopt;
  }

  /// Whether `v` may be kept in `l` as far as it alone is concerned (1.).
  bool keepable(const Value *v, Layout l) const {
    if (v->type().numElements() == 0)
      return false;
    const LayoutSite &p = siteOf(v->producer());
    if (!p.copiesAsIs && (!p.kernel || !p.kernel->producesLayout(v->resultIndex(), l)))
      return false;
    if (llvm::is_contained(v->producer()->graph().outputs(), v))
      return false;
    for (const Node *u : v->users()) {
      const LayoutSite &c = siteOf(u);
      if (c.copiesAsIs)
        continue;
      if (!c.kernel || c.device != p.device)
        return false;
      for (unsigned i = 0; i < u->numOperands(); ++i)
        if (u->operand(i) == v && !c.kernel->acceptsLayout(i, l))
          return false;
    }
    return true;
  }

  /// The bytes of `v` its producer and consumers would compute without a
  /// staged copy in `l`, minus those they would in plain (3.).
  int64_t vote(const Value *v, Layout l) const {
    int64_t bytes = v->type().numElements() * dtypeSize(v->type().dtype), total = 0;
    auto count = [&](std::optional<Layout> preferred) {
      if (preferred)
        total += *preferred == l ? bytes : -bytes;
    };
    if (const LayoutSite &p = siteOf(v->producer()); p.kernel)
      count(p.kernel->preferredResultLayout(v->resultIndex()));
    for (const Node *u : v->users()) {
      const LayoutSite &c = siteOf(u);
      for (unsigned i = 0; c.kernel && i < u->numOperands(); ++i)
        if (u->operand(i) == v)
          count(c.kernel->preferredOperandLayout(i));
    }
    return total;
  }

  const Value *find(const Value *v) {
    auto it = parent_.find(v);
    if (it == parent_.end() || it->second == v)
      return v;
    return parent_[v] = find(it->second);
  }

  /// 2.: same-kind copies and layout-following kernels tie their values.
  void tieGroups() {
    for (const LayoutSite &s : sites_) {
      if (s.copiesAsIs) {
        parent_[find(s.node->result())] = find(s.node->operand(0));
        continue;
      }
      if (!s.kernel || !s.kernel->layoutFollowsOperands())
        continue;
      llvm::SmallVector<const Value *, 6> members(s.node->operands().begin(),
                                                  s.node->operands().end());
      for (auto &r : s.node->results())
        members.push_back(r.get());
      for (const Value *m : members)
        parent_[find(m)] = find(members[0]);
    }
  }

  llvm::ArrayRef<LayoutSite> sites_;
  LayoutOptions options_;
  llvm::DenseMap<const Node *, size_t> index_;
  llvm::DenseMap<const Value *, const Value *> parent_;
};

} // namespace

llvm::DenseMap<const Value *, Layout> assignLayouts(llvm::ArrayRef<LayoutSite> sites,
                                                    const LayoutOptions &options) {
  return Assignment(sites, options).run();
}

} // namespace graphc
