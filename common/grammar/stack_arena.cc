#include "common/grammar/stack_arena.h"

#include <utility>

namespace tessera::grammar {

StackArena::StackArena(const Grammar* grammar) : grammar_(grammar) {
  nodes_ = {{kNoPosition, 0, kAcceptNode}, {kNoPosition, 0, kContextNode}};
  stamp_ = {0, 0};
}

uint32_t StackArena::Intern(uint32_t pos, uint32_t count, uint32_t parent) {
  const uint32_t next = static_cast<uint32_t>(nodes_.size());
  bool inserted;
  uint32_t id;
  if (count == 0) {
    auto [it, added] = index_.try_emplace(Key(pos, parent), next);
    inserted = added;
    id = it->second;
  } else {
    auto [it, added] = counted_index_.try_emplace(Node{pos, count, parent}, next);
    inserted = added;
    id = it->second;
  }
  if (inserted) {
    nodes_.push_back({pos, count, parent});
    stamp_.push_back(0);
  }
  return id;
}

void StackArena::Truncate(size_t n) {
  if (n < 2) n = 2;
  for (size_t id = n; id < nodes_.size(); ++id) {
    const Node& node = nodes_[id];
    if (node.count == 0) {
      index_.erase(Key(node.pos, node.parent));
    } else {
      counted_index_.erase(node);
    }
  }
  nodes_.resize(n);
  stamp_.resize(n);
  // Relative parents past the cut are gone too.
  while (!relative_.parents.empty() && relative_.parents.back() >= n) relative_.parents.pop_back();
}

void StackArena::Start(std::vector<uint32_t>& out) {
  out.clear();
  ++step_;
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) {
    work_.push_back({alt, 0, kAcceptNode});
  }
  Close(out);
}

void StackArena::Seed(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out) {
  out.clear();
  ++step_;
  work_.push_back({pos, 0, parent});
  Close(out);
}

void StackArena::Advance(absl::Span<const uint32_t> from, uint8_t byte,
                         std::vector<uint32_t>& out) {
  out.clear();
  ++step_;
  for (uint32_t node : from) {
    const Node& n = nodes_[node];
    if (n.pos == kNoPosition) continue;  // a bottom accepts nothing
    if (grammar_->bytes_at(n.pos).Contains(byte)) work_.push_back({n.pos + 1, 0, n.parent});
  }
  Close(out);
}

uint32_t StackArena::StartRelativeRepetition(uint32_t pos, std::vector<Frame> below,
                                             uint32_t bottom, uint32_t max_relative) {
  relative_ = {max_relative, bottom, std::move(below), {}};
  return Intern(pos, kRelativeCount, RelativeParent(0));
}

uint32_t StackArena::RelativeParent(uint32_t j) {
  while (relative_.parents.size() <= j) {
    const uint32_t tag = static_cast<uint32_t>(relative_.parents.size());
    uint32_t node = Intern(kNoPosition, tag, relative_.bottom);
    for (size_t i = relative_.below.size(); i-- > 0;) {
      node = Intern(relative_.below[i].pos, relative_.below[i].count, node);
    }
    relative_.parents.push_back(node);
  }
  return relative_.parents[j];
}

void StackArena::ExpandRepetition(const Node& item) {
  const Repetition& rep = grammar_->repetition_at(item.pos);
  uint32_t next_copy = 0;  // the return frame of another copy, or 0 when none may start
  if (item.count & kRelativeCount) {
    // Relative: another copy and the way out are both open; the caller checks the count.
    const uint32_t j = item.count & ~kRelativeCount;
    if (j < relative_.max_relative) {
      next_copy = Intern(item.pos, kRelativeCount | (j + 1), RelativeParent(j + 1));
    }
  } else if (item.count < rep.max) {
    next_copy = Intern(item.pos, item.count + 1, item.parent);
  }
  if (next_copy != 0) {
    for (uint32_t alt : grammar_->alternatives(rep.rule)) work_.push_back({alt, 0, next_copy});
  }
  if ((item.count & kRelativeCount) || item.count >= rep.min) {
    work_.push_back({item.pos + 1, 0, item.parent});
  }
}

void StackArena::Close(std::vector<uint32_t>& out) {
  while (!work_.empty()) {
    Node item = work_.back();
    work_.pop_back();
    const Element& e = grammar_->element(item.pos);
    if (e.kind == Element::Kind::kEnd) {
      // The rule is done: continue at the return node below (or report the bottom).
      const uint32_t below = item.parent;
      if (nodes_[below].pos == kNoPosition) {
        if (stamp_[below] != step_) {
          stamp_[below] = step_;
          out.push_back(below);
        }
      } else {
        work_.push_back(nodes_[below]);
      }
      continue;
    }
    uint32_t id = Intern(item.pos, item.count, item.parent);
    if (stamp_[id] == step_) continue;
    stamp_[id] = step_;
    if (e.kind == Element::Kind::kBytes) {
      if (!grammar_->byte_set(e.value).Empty()) out.push_back(id);
      continue;
    }
    if (e.kind == Element::Kind::kRepeat) {
      ExpandRepetition(item);
      continue;
    }
    // A call: push the return position unless the call is the alternative's last element.
    uint32_t ret = item.parent;
    if (grammar_->element(item.pos + 1).kind != Element::Kind::kEnd) {
      ret = Intern(item.pos + 1, 0, item.parent);
    }
    for (uint32_t alt : grammar_->alternatives(e.value)) work_.push_back({alt, 0, ret});
  }
}

}  // namespace tessera::grammar
