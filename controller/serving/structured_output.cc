#include "controller/serving/structured_output.h"

#include <list>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/grammar/choices.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/json_grammar.h"
#include "common/grammar/json_schema.h"
#include "common/grammar/regex.h"
#include "controller/serving/request_validation.h"
#include "nlohmann/json.hpp"

namespace tessera::serving {
namespace {

// Compiled grammars by (kind, options, text), least recently used dropped first.
class GbnfCache {
 public:
  static constexpr size_t kMaxEntries = 256;
  static constexpr size_t kMaxBytes = size_t{32} << 20;

  bool Find(const std::string& key, std::string* gbnf) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    entries_.splice(entries_.begin(), entries_, it->second);
    *gbnf = entries_.front().second;
    return true;
  }
  void Insert(const std::string& key, const std::string& gbnf) {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.contains(key)) return;
    entries_.emplace_front(key, gbnf);
    index_.emplace(key, entries_.begin());
    bytes_ += key.size() + gbnf.size();
    while (entries_.size() > 1 && (entries_.size() > kMaxEntries || bytes_ > kMaxBytes)) {
      bytes_ -= entries_.back().first.size() + entries_.back().second.size();
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
  }

 private:
  std::mutex mu_;
  std::list<std::pair<std::string, std::string>> entries_;
  absl::flat_hash_map<std::string, std::list<std::pair<std::string, std::string>>::iterator> index_;
  size_t bytes_ = 0;
};

GbnfCache& Cache() {
  static GbnfCache* cache = new GbnfCache();
  return *cache;
}

absl::StatusOr<std::string> ToGbnf(const StructuredOutput& so) {
  using Kind = StructuredOutput::Kind;
  switch (so.kind) {
    case Kind::kNone:
      return std::string();
    case Kind::kJsonObject:
      if (so.compact_json) {
        // JSON mode without optional whitespace: the schema {"type": "object"}.
        grammar::JsonSchemaOptions o;
        o.max_whitespace = 0;
        return grammar::JsonSchemaToGbnf(nlohmann::json{{"type", "object"}}, o);
      }
      return std::string(grammar::kJsonObjectGbnf);
    case Kind::kJsonSchema: {
      // Ordered: the schema's properties are written in its author's order.
      const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(so.text, nullptr, false);
      if (schema.is_discarded()) return absl::InvalidArgumentError("the schema is not valid JSON");
      grammar::JsonSchemaOptions o;
      if (so.compact_json) o.max_whitespace = 0;
      return grammar::JsonSchemaToGbnf(schema, o);
    }
    case Kind::kRegex:
      return grammar::RegexToGbnf(so.text);
    case Kind::kChoice:
      return grammar::ChoicesToGbnf(so.choices);
    case Kind::kGrammar:
      return so.text;
  }
  return absl::InternalError("unknown structured output kind");
}

}  // namespace

absl::StatusOr<std::string> CompileStructuredOutput(const StructuredOutput& so) {
  using Kind = StructuredOutput::Kind;
  if (so.kind == Kind::kNone) return std::string();
  size_t size = so.text.size();
  for (const std::string& c : so.choices) size += c.size();
  if (size > kMaxStructuredOutputBytes) {
    return InvalidField(so.field, absl::StrCat(so.field, ": ", size, " bytes; at most ",
                                               kMaxStructuredOutputBytes, " are accepted"));
  }
  if (so.kind == Kind::kChoice && so.choices.size() > kMaxChoices) {
    return InvalidField(so.field, absl::StrCat(so.field, ": ", so.choices.size(),
                                               " choices; at most ", kMaxChoices, " are accepted"));
  }
  std::string key = absl::StrCat(static_cast<int>(so.kind), so.compact_json ? "c" : "w", ":");
  if (so.kind == Kind::kChoice) {
    // Length-prefixed, so that no two lists share a key.
    for (const std::string& c : so.choices) absl::StrAppend(&key, c.size(), ":", c);
  } else {
    key += so.text;
  }
  std::string gbnf;
  if (Cache().Find(key, &gbnf)) return gbnf;

  absl::StatusOr<std::string> compiled = ToGbnf(so);
  if (!compiled.ok()) {
    return InvalidField(so.field, absl::StrCat(so.field, ": ", compiled.status().message()));
  }
  // The workers parse the same text: a grammar that fails (or passes a bound) fails here.
  absl::StatusOr<grammar::Grammar> parsed = grammar::ParseGbnf(*compiled);
  if (!parsed.ok()) {
    const char* what = so.kind == Kind::kGrammar ? "" : "the compiled grammar: ";
    return InvalidField(so.field, absl::StrCat(so.field, ": ", what, parsed.status().message()));
  }
  Cache().Insert(key, *compiled);
  return *std::move(compiled);
}

}  // namespace tessera::serving
