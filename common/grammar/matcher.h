// The grammar state of one generation: which bytes and tokens may come next.
//
//   auto compiled = CompiledGrammar::Create(*ParseGbnf(text), TokenTrie::Build(pieces, special));
//   Matcher m(compiled);
//   m.FillMask(words);            // bit id of words[id / 64]: token id keeps output in grammar
//   ... sample a token t with its bit set (or end-of-generation when m.CanEnd()) ...
//   m.AcceptToken(t);
//
// The state is a set of parse stacks (stack_arena.h). Bytes are matched one at a time, so a
// token may end in the middle of a UTF-8 character: the partial character is simply a
// position inside the byte sequence of its class. Every accepted token or byte string is one
// step of history; Rollback(n) undoes the last n steps (speculative decoding).
//
// Not thread-safe: one Matcher per generation. Copying is allowed (a copy is independent).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/stack_arena.h"
#include "common/grammar/token_walk.h"

namespace tessera::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> compiled);

  // Appends token `id` when its bytes keep the output inside the grammar and returns true;
  // otherwise returns false and changes nothing. Ids out of range, special and empty tokens
  // are never accepted.
  bool AcceptToken(uint32_t id);
  // The same for raw bytes (e.g. text forced into the output); empty bytes are accepted as
  // a step that changes nothing.
  bool AcceptBytes(std::string_view bytes);

  // Whether the output so far is a complete sentence of the grammar (the caller may then
  // allow end-of-generation).
  bool CanEnd() const;
  // Whether nothing but the end may follow.
  bool MustEnd() const;

  // Fills `words` (at least vocab().mask_words() of them) with the token mask: bit id set
  // iff AcceptToken(id) would succeed. Words past the vocabulary's are left untouched;
  // bits past vocab_size() in the last word are zero.
  void FillMask(absl::Span<uint64_t> words);

  // Steps accepted since the start that Rollback can undo.
  size_t steps() const { return history_.size() - 1; }
  // Undoes the last n steps; false (and nothing undone) when n > steps().
  bool Rollback(size_t n);
  // Back to the start of the grammar.
  void Reset();

  const CompiledGrammar& compiled() const { return *compiled_; }

 private:
  // Advances the current stacks by `bytes` into scratch_; false if the set empties.
  bool Advance(std::string_view bytes);

  std::shared_ptr<const CompiledGrammar> compiled_;
  StackArena arena_;
  std::vector<std::vector<uint32_t>> history_;  // stack sets; back() is the current state
  std::vector<uint32_t> scratch_, scratch_next_;
  std::vector<const CompiledGrammar::ContextTokens*> seen_contexts_;
  TokenWalk walk_;
};

}  // namespace tessera::grammar
