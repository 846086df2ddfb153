// Random sentences of a grammar, drawn by walking a Matcher byte by byte: what `tessera
// grammar --sample` prints and what the front ends' tests check against independent
// validators.
//
//   GrammarSampler sampler(*ParseGbnf(text));
//   std::mt19937_64 rng(seed);
//   absl::StatusOr<std::string> sentence = sampler.Sample(rng);
//
// A walk picks each next byte among those the Matcher's mask allows (over a vocabulary of
// the 256 one-byte tokens), ends where the grammar may end with probability
// `end_probability`, and once it is `soft_max_bytes` long takes the shortest way to an end:
// computed from the parse stacks (StackArena) and the length of each rule's shortest
// sentence (Knuth's generalisation of Dijkstra's algorithm to grammars, 1977), then checked
// by the Matcher. So every walk ends, and every sample is a sentence of the grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/grammar.h"
#include "common/grammar/stack_arena.h"

namespace tessera::grammar {

struct SampleOptions {
  // From this length on, the walk heads for the nearest end.
  size_t soft_max_bytes = 200;
  // A sample that cannot end within this many bytes is an error (FailedPrecondition).
  size_t max_bytes = 4096;
  // At each byte where the grammar may end (and more could follow), the chance to end.
  double end_probability = 0.15;
  // When ASCII bytes are among those allowed, the chance to choose among them only (samples
  // stay readable; the rest of the time any allowed byte is equally likely).
  double ascii_preference = 0.75;
};

class GrammarSampler {
 public:
  explicit GrammarSampler(Grammar grammar);

  // One random sentence.
  absl::StatusOr<std::string> Sample(std::mt19937_64& rng, const SampleOptions& options = {}) const;

  // The shortest bytes that make `prefix` a sentence ("" when it is one already).
  // InvalidArgument when `prefix` does not start any sentence; FailedPrecondition when the
  // ending would take `prefix` past `max_bytes`.
  absl::StatusOr<std::string> ShortestEnding(std::string_view prefix, size_t max_bytes) const;

  // The grammar over the one-byte vocabulary (token id b is the byte b).
  const std::shared_ptr<const CompiledGrammar>& compiled() const { return compiled_; }

 private:
  // Shortest length from frame (pos, count) to the end of its alternative (saturating).
  size_t RestLength(uint32_t pos, uint32_t count) const;
  // Appends a shortest completion of the alternative from frame (pos, count) to `out`.
  void WriteRest(uint32_t pos, uint32_t count, std::string& out) const;

  std::shared_ptr<const CompiledGrammar> compiled_;
  std::vector<size_t> rule_length_;  // each rule's shortest sentence length
  std::vector<uint32_t> rule_best_;  // the start of the alternative that gives it
};

}  // namespace tessera::grammar
