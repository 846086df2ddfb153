#include "common/grammar/stack_arena.h"

namespace tessera::grammar {

namespace {
constexpr uint32_t kNoPosition = UINT32_MAX;
}  // namespace

StackArena::StackArena(const Grammar* grammar) : grammar_(grammar) {
  nodes_ = {{kNoPosition, kAcceptNode}, {kNoPosition, kContextNode}};
  stamp_ = {0, 0};
}

uint32_t StackArena::Intern(uint32_t pos, uint32_t parent) {
  auto [it, inserted] = index_.try_emplace(Key(pos, parent), static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    nodes_.push_back({pos, parent});
    stamp_.push_back(0);
  }
  return it->second;
}

void StackArena::Truncate(size_t n) {
  if (n < 2) n = 2;
  for (size_t id = n; id < nodes_.size(); ++id)
    index_.erase(Key(nodes_[id].pos, nodes_[id].parent));
  nodes_.resize(n);
  stamp_.resize(n);
}

void StackArena::Start(std::vector<uint32_t>& out) {
  out.clear();
  ++step_;
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) work_.push_back({alt, kAcceptNode});
  Close(out);
}

void StackArena::Seed(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out) {
  out.clear();
  ++step_;
  work_.push_back({pos, parent});
  Close(out);
}

void StackArena::Advance(absl::Span<const uint32_t> from, uint8_t byte,
                         std::vector<uint32_t>& out) {
  out.clear();
  ++step_;
  for (uint32_t node : from) {
    if (node == kAcceptNode || node == kContextNode) continue;
    const Node& n = nodes_[node];
    if (grammar_->bytes_at(n.pos).Contains(byte)) work_.push_back({n.pos + 1, n.parent});
  }
  Close(out);
}

void StackArena::Close(std::vector<uint32_t>& out) {
  while (!work_.empty()) {
    Node item = work_.back();
    work_.pop_back();
    const Element& e = grammar_->element(item.pos);
    if (e.kind == Element::Kind::kEnd) {
      // The rule is done: continue at the return node below (or report the bottom).
      uint32_t below = item.parent;
      if (below == kAcceptNode || below == kContextNode) {
        if (stamp_[below] != step_) {
          stamp_[below] = step_;
          out.push_back(below);
        }
      } else {
        work_.push_back(nodes_[below]);
      }
      continue;
    }
    uint32_t id = Intern(item.pos, item.parent);
    if (stamp_[id] == step_) continue;
    stamp_[id] = step_;
    if (e.kind == Element::Kind::kBytes) {
      if (!grammar_->byte_set(e.value).Empty()) out.push_back(id);
      continue;
    }
    // A call: push the return position unless the call is the alternative's last element.
    uint32_t ret = item.parent;
    if (grammar_->element(item.pos + 1).kind != Element::Kind::kEnd) {
      ret = Intern(item.pos + 1, item.parent);
    }
    for (uint32_t alt : grammar_->alternatives(e.value)) work_.push_back({alt, ret});
  }
}

}  // namespace tessera::grammar
