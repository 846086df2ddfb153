// The pushdown automaton of a Grammar: parse stacks as shared, interned nodes.
//
// A stack is a chain of nodes (position, parent), the top node's position being a kBytes
// element: the next byte must be in its set. Parents hold return positions (where to go on
// when the called rule ends). Nodes are interned, so equal stacks have the same id, a set of
// stacks is a vector of ids, and stacks that share a tail share its nodes. A call in tail
// position pushes no return node, so right recursion (x* expands to R ::= x R | "") runs in
// constant stack depth.
//
// Two ids are reserved: kAcceptNode is the empty stack (the grammar has been matched; the
// bottom of every stack), and kContextNode stands for "the unknown stack below this rule"
// (mask precomputation: a stack that pops into it has left the rule it started in).
//
// Termination: Grammar::Compile refuses left recursion, so expanding calls without
// consuming a byte always ends; a visit stamp makes each (position, parent) pair expand once
// per step even when many paths reach it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "common/grammar/grammar.h"

namespace tessera::grammar {

inline constexpr uint32_t kAcceptNode = 0;
inline constexpr uint32_t kContextNode = 1;

class StackArena {
 public:
  // `grammar` must outlive the arena.
  explicit StackArena(const Grammar* grammar);

  // The stacks that start the grammar (before any byte), written to `out` (cleared first).
  void Start(std::vector<uint32_t>& out);
  // The stacks that continue at `pos` with `parent` below, written to `out` (cleared first).
  void Seed(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out);
  // Every stack of `from` that accepts `byte`, advanced past it (deduplicated), written to
  // `out` (cleared first; must not alias `from`). kAcceptNode / kContextNode in `from`
  // accept nothing; either may appear in `out`.
  void Advance(absl::Span<const uint32_t> from, uint8_t byte, std::vector<uint32_t>& out);

  // The node for `pos` on top of `parent` (a kBytes or return position), created if new.
  uint32_t Push(uint32_t pos, uint32_t parent) { return Intern(pos, parent); }

  uint32_t position(uint32_t node) const { return nodes_[node].pos; }
  uint32_t parent(uint32_t node) const { return nodes_[node].parent; }
  const Grammar& grammar() const { return *grammar_; }

  // Node count; Truncate(n) forgets the nodes created since size() was n (ids >= n must no
  // longer be in use). Scratch work (mask computation, rejected input) is undone this way.
  size_t size() const { return nodes_.size(); }
  void Truncate(size_t n);

 private:
  struct Node {
    uint32_t pos;
    uint32_t parent;
  };
  static uint64_t Key(uint32_t pos, uint32_t parent) { return (uint64_t{pos} << 32) | parent; }
  uint32_t Intern(uint32_t pos, uint32_t parent);
  // Expands the pending (position, parent) pairs in work_ into `out`.
  void Close(std::vector<uint32_t>& out);

  const Grammar* grammar_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> stamp_;  // per node: the step that last visited it
  uint32_t step_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<Node> work_;
};

}  // namespace tessera::grammar
