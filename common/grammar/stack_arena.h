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
// A counted repetition (Element::kRepeat) keeps its copy count in its frame: a node is
// (position, count, parent), and the return frame below a copy's body is (repeat position,
// c, parent) while copy c (1-based) is being matched. When the body ends, the frame goes on
// with copy c + 1 if c < max, and past the repetition if c >= min. Other frames have count 0.
//
// Relative frames serve CompiledGrammar's classification of every copy of a repetition at
// once: StartRelativeRepetition makes one repetition frame whose count is "the unknown
// count plus j" (kRelativeCount | j). Such a frame goes on with another copy and leaves the
// repetition whatever j is (up to max_relative), and its parent is the stack below re-built
// on a bottom tagged with j, so every stack records how many copies it went through: the
// caller decides afterwards which counts allow it.
//
// Termination: Grammar::Compile refuses left recursion, so expanding calls without
// consuming a byte always ends (a repetition's copies are bounded by its max); a visit stamp
// makes each node expand once per step even when many paths reach it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "common/grammar/grammar.h"

namespace tessera::grammar {

inline constexpr uint32_t kAcceptNode = 0;
inline constexpr uint32_t kContextNode = 1;
// Marks a relative copy count (see above).
inline constexpr uint32_t kRelativeCount = 1u << 31;

// A frame of a stack: a position and its copy count (0 unless a repetition's).
struct Frame {
  uint32_t pos = 0;
  uint32_t count = 0;
  bool operator==(const Frame&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const Frame& f) {
    return H::combine(std::move(h), (uint64_t{f.count} << 32) | f.pos);
  }
};

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

  // The node for `frame` on top of `parent` (a kBytes or return position), created if new.
  uint32_t Push(Frame frame, uint32_t parent) { return Intern(frame.pos, frame.count, parent); }

  // Starts relative counting for the repetition at `pos` (a kRepeat position) over the
  // frames `below` (top first) and `bottom` (kAcceptNode or kContextNode), and returns the
  // repetition's frame with relative count 0. Relative counts stop at `max_relative`. Once
  // per arena.
  uint32_t StartRelativeRepetition(uint32_t pos, std::vector<Frame> below, uint32_t bottom,
                                   uint32_t max_relative);

  uint32_t position(uint32_t node) const { return nodes_[node].pos; }
  uint32_t count(uint32_t node) const { return nodes_[node].count; }
  uint32_t parent(uint32_t node) const { return nodes_[node].parent; }
  // Whether `node` is a bottom: kAcceptNode, kContextNode, or one tagged with a relative
  // count (its count(); its parent() is the bottom it stands for).
  bool IsBottom(uint32_t node) const { return nodes_[node].pos == kNoPosition; }
  const Grammar& grammar() const { return *grammar_; }

  // Node count; Truncate(n) forgets the nodes created since size() was n (ids >= n must no
  // longer be in use). Scratch work (mask computation, rejected input) is undone this way.
  size_t size() const { return nodes_.size(); }
  void Truncate(size_t n);

 private:
  static constexpr uint32_t kNoPosition = UINT32_MAX;
  struct Node {
    uint32_t pos;
    uint32_t count;
    uint32_t parent;
    bool operator==(const Node&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Node& n) {
      return H::combine(std::move(h), (uint64_t{n.pos} << 32) | n.parent, n.count);
    }
  };
  static uint64_t Key(uint32_t pos, uint32_t parent) { return (uint64_t{pos} << 32) | parent; }
  uint32_t Intern(uint32_t pos, uint32_t count, uint32_t parent);
  // Expands the pending nodes in work_ into `out`.
  void Close(std::vector<uint32_t>& out);
  // A repetition's frame reached when a copy ends (or the repetition starts, count 0).
  void ExpandRepetition(const Node& item);
  // The relative stack below for relative count j, built on first use.
  uint32_t RelativeParent(uint32_t j);

  const Grammar* grammar_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> stamp_;  // per node: the step that last visited it
  uint32_t step_ = 0;
  // Nodes by content: those with count 0 (nearly all) by a 64-bit key, the others apart.
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  absl::flat_hash_map<Node, uint32_t> counted_index_;
  std::vector<Node> work_;
  // StartRelativeRepetition's frames and the parents built so far (by relative count).
  struct RelativeRepetition {
    uint32_t max_relative = 0;
    uint32_t bottom = kContextNode;
    std::vector<Frame> below;
    std::vector<uint32_t> parents;
  } relative_;
};

}  // namespace tessera::grammar
