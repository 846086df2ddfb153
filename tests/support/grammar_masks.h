// Token masks of a grammar matcher for tests: the mask FillMask gives, the same found by
// trying every token (the independent truth), and whether a grammar accepts a text whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/matcher.h"
#include "common/grammar/token_trie.h"

namespace tessera::testing {

// The ids FillMask allows.
inline std::vector<uint32_t> MaskIds(grammar::Matcher& m) {
  std::vector<uint64_t> words(m.compiled().vocab().mask_words(), ~uint64_t{0});
  m.FillMask(absl::MakeSpan(words));
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < m.compiled().vocab().vocab_size(); ++id) {
    if ((words[id >> 6] >> (id & 63)) & 1) ids.push_back(id);
  }
  return ids;
}

// The ids a copy of the matcher accepts, tried one by one.
inline std::vector<uint32_t> BruteForceIds(const grammar::Matcher& m) {
  std::vector<uint32_t> ids;
  grammar::Matcher probe = m;
  for (uint32_t id = 0; id < m.compiled().vocab().vocab_size(); ++id) {
    if (probe.AcceptToken(id)) {
      ids.push_back(id);
      probe.Rollback(1);
    }
  }
  return ids;
}

// Whether GBNF `gbnf` parses and accepts `text` whole, byte by byte.
inline bool GrammarAccepts(const std::string& gbnf, const std::string& text) {
  auto parsed = grammar::ParseGbnf(gbnf);
  if (!parsed.ok()) return false;
  auto compiled =
      grammar::CompiledGrammar::Create(*std::move(parsed), grammar::TokenTrie::Build({}, {}));
  grammar::Matcher matcher(compiled);
  return matcher.AcceptBytes(text) && matcher.CanEnd();
}

}  // namespace tessera::testing
