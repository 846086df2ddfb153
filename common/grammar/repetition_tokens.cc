#include "common/grammar/repetition_tokens.h"

#include <algorithm>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "common/grammar/token_walk.h"

namespace tessera::grammar {

namespace {

// A stack's tag in the relative walk: j, the copies begun after the context's current one,
// with kLeft set once the stack has left the repetition.
constexpr uint32_t kLeft = 1u << 31;
constexpr uint32_t kNoTag = UINT32_MAX;

// TokenWalk (token_walk.h) for a relative repetition frame: reports, for each token in trie
// order that is not rejected for every count, the set of stacks alive at its end (StackSets::kEmpty
// when it dies) and the list of tags of the stacks that popped below the context's frames at a byte
// of `follow` on the way (kNoEscapes for none). Both are ids: a token's outcome depends on nothing
// else.
class RelativeWalk {
 public:
  static constexpr uint32_t kNoEscapes = 0;

  template <typename OnToken>
  void Run(StackArena& arena, const TokenTrie& vocab, absl::Span<const uint32_t> ids,
           absl::Span<const uint32_t> shared_prefix, uint32_t start, const ByteSet* follow,
           OnToken&& on_token) {
    sets_.Clear();
    levels_.assign(1, sets_.Add({start}));
    escapes_.assign(1, kNoEscapes);
    size_t valid = 0;  // levels_[0..valid] hold the states of the current prefix
    size_t i = 0;
    while (i < ids.size()) {
      const std::string_view bytes = vocab.token(ids[i]);
      size_t depth = std::min<size_t>(i == 0 ? 0 : shared_prefix[i], valid);
      bool dead = false;
      while (depth < bytes.size()) {
        if (levels_.size() <= depth + 1) {
          levels_.resize(depth + 2);
          escapes_.resize(depth + 2);
        }
        const uint8_t byte = static_cast<uint8_t>(bytes[depth]);
        escapes_[depth + 1] = escapes_[depth];
        if (follow != nullptr && follow->Contains(byte)) {
          escapes_[depth + 1] = AddEscapes(arena, escapes_[depth], levels_[depth]);
        }
        levels_[depth + 1] = sets_.Next(arena, levels_[depth], byte);
        ++depth;
        if (levels_[depth] == StackSets::kEmpty) {
          dead = true;
          break;
        }
      }
      valid = depth;
      if (!dead) {
        on_token(ids[i++], levels_[depth], escapes_[depth]);
        continue;
      }
      // Every following token that starts with this dead prefix ends the same way.
      const uint32_t escapes = escapes_[depth];
      if (escapes == kNoEscapes) {
        i = SkipDeadPrefix(vocab, ids, shared_prefix, i, depth);
        continue;
      }
      on_token(ids[i++], StackSets::kEmpty, escapes);
      while (i < ids.size() && shared_prefix[i] >= depth) {
        on_token(ids[i++], StackSets::kEmpty, escapes);
      }
    }
  }

  // The tags of the stacks of `set`.
  std::vector<uint32_t> EndTags(const StackArena& arena, uint32_t set) {
    UpdateNodeTags(arena);
    std::vector<uint32_t> tags;
    for (uint32_t node : sets_.stacks(set)) tags.push_back(node_tags_[node]);
    return tags;
  }
  const std::vector<uint32_t>& Escapes(uint32_t escapes) const { return escape_lists_[escapes]; }

 private:
  // Tags of the nodes created since the last call (a node's parent is older than it).
  void UpdateNodeTags(const StackArena& arena) {
    for (uint32_t id = static_cast<uint32_t>(node_tags_.size()); id < arena.size(); ++id) {
      uint32_t tag;
      if (arena.IsBottom(id)) {
        tag = id == kAcceptNode || id == kContextNode ? kNoTag : kLeft | arena.count(id);
      } else if (arena.count(id) & kRelativeCount) {
        tag = arena.count(id) & ~kRelativeCount;
      } else {
        tag = node_tags_[arena.parent(id)];
      }
      node_tags_.push_back(tag);
    }
  }

  // The escape list `escapes` with the tags of the stacks of `set` that left the frames.
  uint32_t AddEscapes(const StackArena& arena, uint32_t escapes, uint32_t set) {
    auto [it, inserted] = added_.try_emplace((uint64_t{escapes} << 32) | set, escapes);
    if (!inserted) return it->second;
    UpdateNodeTags(arena);
    std::vector<uint32_t> list = escape_lists_[escapes];
    for (uint32_t node : sets_.stacks(set)) {
      if (!arena.IsBottom(node) || arena.parent(node) != kContextNode) continue;
      if (std::find(list.begin(), list.end(), node_tags_[node]) == list.end()) {
        list.push_back(node_tags_[node]);
      }
    }
    std::sort(list.begin(), list.end());
    auto [list_it, added] =
        escape_index_.try_emplace(list, static_cast<uint32_t>(escape_lists_.size()));
    if (added) escape_lists_.push_back(std::move(list));
    it = added_.find((uint64_t{escapes} << 32) | set);  // escape_index_ does not move added_
    it->second = list_it->second;
    return list_it->second;
  }

  StackSets sets_;
  std::vector<uint32_t> node_tags_;  // per node id
  std::vector<uint32_t> levels_;     // per depth: the set of the current prefix
  std::vector<uint32_t> escapes_;    // per depth: the escape list so far
  std::vector<std::vector<uint32_t>> escape_lists_ = {{}};
  absl::flat_hash_map<std::vector<uint32_t>, uint32_t> escape_index_ = {{{}, kNoEscapes}};
  absl::flat_hash_map<uint64_t, uint32_t> added_;  // (escapes << 32 | set) -> escapes
};

}  // namespace

std::unique_ptr<RepetitionTokens> RepetitionTokens::Classify(
    const Grammar& grammar, const TokenTrie& vocab, absl::Span<const Frame> frames,
    bool whole_stack, size_t at, absl::Span<const uint32_t> ids,
    absl::Span<const uint32_t> shared_prefix, std::vector<uint64_t> accepted_bits) {
  const Repetition& rep = grammar.repetition_at(frames[at].pos);
  auto out = std::unique_ptr<RepetitionTokens>(new RepetitionTokens());
  out->max_ = rep.max;
  out->always_bits_ = std::move(accepted_bits);
  out->always_bits_.resize(vocab.mask_words(), 0);

  StackArena arena(&grammar);
  uint32_t node = arena.StartRelativeRepetition(
      frames[at].pos, std::vector<Frame>(frames.begin() + at + 1, frames.end()),
      whole_stack ? kAcceptNode : kContextNode, rep.max - 1);
  for (size_t i = at; i-- > 0;) node = arena.Push(frames[i], node);
  const ByteSet* follow =
      whole_stack ? nullptr : &grammar.follow(grammar.rule_of(frames.back().pos));

  // Counts for which a stack with tag `tag` is possible.
  auto possible = [&](uint32_t tag) {
    const uint32_t j = tag & ~kLeft;
    const uint32_t lo = (tag & kLeft) && rep.min > j + 1 ? rep.min - j : 1;
    return Range{lo, rep.max - j};
  };
  auto merge = [](std::vector<Range>& ranges) {
    if (ranges.size() < 2) return;
    std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.lo < b.lo; });
    size_t kept = 0;
    for (size_t k = 1; k < ranges.size(); ++k) {
      if (ranges[k].lo <= ranges[kept].hi + 1) {
        ranges[kept].hi = std::max(ranges[kept].hi, ranges[k].hi);
      } else {
        ranges[++kept] = ranges[k];
      }
    }
    ranges.resize(kept + 1);
  };
  // A token's outcome over the counts, the same for every token with the same end set and
  // escape list.
  struct Outcome {
    enum Kind : uint8_t { kUnknown, kRejected, kAlways, kThreshold, kVarying } kind = kUnknown;
    uint32_t threshold = 0;                         // kThreshold
    uint32_t begin = 0, accepted_end = 0, end = 0;  // kVarying: ranges_
  };
  RelativeWalk walk;
  auto outcome_of = [&](uint32_t end_set, uint32_t escapes) {
    Outcome o;
    std::vector<Range> accepted, uncertain;
    if (end_set != StackSets::kEmpty) {
      for (uint32_t tag : walk.EndTags(arena, end_set)) accepted.push_back(possible(tag));
    }
    for (uint32_t tag : walk.Escapes(escapes)) uncertain.push_back(possible(tag));
    merge(accepted);
    merge(uncertain);
    const bool from_one = accepted.size() == 1 && accepted[0].lo == 1;
    bool uncertain_inside = true;  // every uncertain count is an accepted one
    for (Range r : uncertain) uncertain_inside &= from_one && r.hi <= accepted[0].hi;
    if (accepted.empty() && uncertain.empty()) {
      o.kind = Outcome::kRejected;
    } else if (from_one && accepted[0].hi >= rep.max) {
      o.kind = Outcome::kAlways;
    } else if (from_one && uncertain_inside) {
      o.kind = Outcome::kThreshold;
      o.threshold = accepted[0].hi;
    } else {
      o.kind = Outcome::kVarying;
      o.begin = static_cast<uint32_t>(out->ranges_.size());
      out->ranges_.insert(out->ranges_.end(), accepted.begin(), accepted.end());
      o.accepted_end = static_cast<uint32_t>(out->ranges_.size());
      out->ranges_.insert(out->ranges_.end(), uncertain.begin(), uncertain.end());
      o.end = static_cast<uint32_t>(out->ranges_.size());
    }
    return o;
  };
  std::vector<Outcome> by_set;                            // escapes == kNoEscapes
  absl::flat_hash_map<uint64_t, Outcome> by_set_escapes;  // the others
  std::vector<std::pair<uint32_t, uint32_t>> thresholds;  // (t, id)
  walk.Run(arena, vocab, ids, shared_prefix, node, follow,
           [&](uint32_t id, uint32_t end_set, uint32_t escapes) {
             if (end_set == StackSets::kEmpty && escapes == RelativeWalk::kNoEscapes) return;
             Outcome* o;
             if (escapes == RelativeWalk::kNoEscapes) {
               if (by_set.size() <= end_set) by_set.resize(end_set + 1);
               o = &by_set[end_set];
             } else {
               o = &by_set_escapes[(uint64_t{escapes} << 32) | end_set];
             }
             if (o->kind == Outcome::kUnknown) *o = outcome_of(end_set, escapes);
             switch (o->kind) {
               case Outcome::kAlways:
                 out->always_bits_[id >> 6] |= uint64_t{1} << (id & 63);
                 break;
               case Outcome::kThreshold:
                 thresholds.push_back({o->threshold, id});
                 break;
               case Outcome::kVarying:
                 out->varying_.push_back({id, o->begin, o->accepted_end, o->end});
                 break;
               default:
                 break;
             }
           });

  // Thresholds by counting sort: below_threshold_[c] = how many have t < c.
  out->below_threshold_.assign(rep.max + 2, 0);
  for (const auto& [t, id] : thresholds) ++out->below_threshold_[t + 1];
  for (uint32_t c = 1; c < out->below_threshold_.size(); ++c) {
    out->below_threshold_[c] += out->below_threshold_[c - 1];
  }
  out->threshold_ids_.resize(thresholds.size());
  std::vector<uint32_t> next(out->below_threshold_.begin(), out->below_threshold_.end() - 1);
  for (const auto& [t, id] : thresholds) out->threshold_ids_[next[t]++] = id;
  out->all_bits_ = out->always_bits_;
  for (uint32_t id : out->threshold_ids_) out->all_bits_[id >> 6] |= uint64_t{1} << (id & 63);
  return out;
}

void RepetitionTokens::Resolve(uint32_t count, std::vector<uint64_t>& accepted_bits,
                               std::vector<uint32_t>& uncertain) const {
  count = std::clamp<uint32_t>(count, 1, max_);
  // Start from whichever of the two bitsets is nearer: every threshold token or none.
  const size_t below = below_threshold_[count];
  const size_t n = threshold_ids_.size();
  if (below <= n - below) {
    accepted_bits = all_bits_;
    for (size_t k = 0; k < below; ++k) {
      const uint32_t id = threshold_ids_[k];
      accepted_bits[id >> 6] &= ~(uint64_t{1} << (id & 63));
    }
  } else {
    accepted_bits = always_bits_;
    for (size_t k = below; k < n; ++k) {
      const uint32_t id = threshold_ids_[k];
      accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  uncertain.clear();
  auto contains = [&](uint32_t begin, uint32_t end) {
    for (uint32_t r = begin; r < end; ++r) {
      if (ranges_[r].lo <= count && count <= ranges_[r].hi) return true;
    }
    return false;
  };
  for (const Varying& v : varying_) {
    if (contains(v.begin, v.accepted_end)) {
      accepted_bits[v.id >> 6] |= uint64_t{1} << (v.id & 63);
    } else if (contains(v.accepted_end, v.end)) {
      uncertain.push_back(v.id);
    }
  }
}

size_t RepetitionTokens::memory_bytes() const {
  return sizeof(*this) + (always_bits_.size() + all_bits_.size()) * sizeof(uint64_t) +
         (threshold_ids_.size() + below_threshold_.size()) * sizeof(uint32_t) +
         varying_.size() * sizeof(Varying) + ranges_.size() * sizeof(Range);
}

}  // namespace tessera::grammar
