#include "common/grammar/repetition_levels.h"

#include <algorithm>
#include <numeric>

namespace tessera::grammar {

namespace {

constexpr uint32_t kNone = UINT32_MAX;

bool SameElement(const Element& a, const Element& b) {
  return a.kind == b.kind && a.value == b.value;
}

// The rule of the nested copy when `rule` has the shape of an optional copy, x R' | ""
// (R' != rule), kNone for the innermost copy x | "", and nullopt-like `ok` false otherwise.
struct ChainShape {
  bool ok = false;
  uint32_t next = kNone;
};

ChainShape ShapeOf(const Grammar& g, uint32_t rule) {
  absl::Span<const uint32_t> alts = g.alternatives(rule);
  if (alts.size() != 2) return {};
  const uint32_t copy = alts[0];
  if (g.element(alts[1]).kind != Element::Kind::kEnd) return {};
  if (g.element(copy).kind == Element::Kind::kEnd) return {};
  const Element& after = g.element(copy + 1);
  if (after.kind == Element::Kind::kEnd) return {true, kNone};
  if (after.kind != Element::Kind::kRule || after.value == rule) return {};
  if (g.element(copy + 2).kind != Element::Kind::kEnd) return {};
  return {true, after.value};
}

// Level of every chain rule (1 for x | "", one more per enclosing copy of the same x), 0 for
// rules that are not optional copies.
std::vector<uint32_t> ChainLevels(const Grammar& g, std::vector<ChainShape>& shapes) {
  const uint32_t n = static_cast<uint32_t>(g.rule_count());
  shapes.resize(n);
  for (uint32_t r = 0; r < n; ++r) shapes[r] = ShapeOf(g, r);
  std::vector<uint32_t> level(n, 0);
  enum State : uint8_t { kUnvisited, kOnPath, kDone };
  std::vector<State> state(n, kUnvisited);
  std::vector<uint32_t> path;
  for (uint32_t start = 0; start < n; ++start) {
    path.clear();
    bool cycle = false;
    for (uint32_t rule = start; state[rule] != kDone;) {
      if (!shapes[rule].ok) {
        state[rule] = kDone;
        break;
      }
      if (state[rule] == kOnPath) {
        cycle = true;
        break;
      }
      state[rule] = kOnPath;
      path.push_back(rule);
      if (shapes[rule].next == kNone) break;
      rule = shapes[rule].next;
    }
    for (size_t i = path.size(); i-- > 0;) {
      const uint32_t rule = path[i];
      state[rule] = kDone;
      if (cycle) continue;
      const uint32_t next = shapes[rule].next;
      if (next == kNone) {
        level[rule] = 1;
      } else if (level[next] > 0 && SameElement(g.element(g.alternatives(rule)[0]),
                                                g.element(g.alternatives(next)[0]))) {
        level[rule] = level[next] + 1;
      }
    }
  }
  return level;
}

}  // namespace

std::vector<uint32_t> CanonicalPositions(const Grammar& g, uint32_t horizon) {
  std::vector<uint32_t> canonical(g.element_count());
  std::iota(canonical.begin(), canonical.end(), 0u);
  const uint32_t cap = horizon + 1;

  // Runs of identical elements: x^r T looks like x^cap T to `horizon` bytes once r >= cap.
  for (uint32_t rule = 0; rule < g.rule_count(); ++rule) {
    for (uint32_t start : g.alternatives(rule)) {
      uint32_t pos = start;
      while (g.element(pos).kind != Element::Kind::kEnd) {
        uint32_t end = pos + 1;
        while (SameElement(g.element(end), g.element(pos))) ++end;
        for (; pos < end; ++pos) {
          if (end - pos > cap) canonical[pos] = end - cap;
        }
      }
    }
  }

  // Chains of optional copies: a rule of level i > cap maps to its chain's rule of level cap.
  std::vector<ChainShape> shapes;
  const std::vector<uint32_t> level = ChainLevels(g, shapes);
  std::vector<uint32_t> by_level;
  for (uint32_t rule = 0; rule < level.size(); ++rule) {
    if (level[rule] >= cap) by_level.push_back(rule);
  }
  std::sort(by_level.begin(), by_level.end(),
            [&](uint32_t a, uint32_t b) { return level[a] < level[b]; });
  std::vector<uint32_t> target(level.size(), kNone);
  for (uint32_t rule : by_level) {
    target[rule] = level[rule] == cap ? rule : target[shapes[rule].next];
    const uint32_t to = target[rule];
    if (to == rule || !(g.follow(rule) == g.follow(to))) continue;
    const absl::Span<const uint32_t> from_alts = g.alternatives(rule);
    const absl::Span<const uint32_t> to_alts = g.alternatives(to);
    for (uint32_t offset = 0; offset < 3; ++offset)
      canonical[from_alts[0] + offset] = to_alts[0] + offset;
    canonical[from_alts[1]] = to_alts[1];
  }
  return canonical;
}

}  // namespace tessera::grammar
