// Structured output as a request asks for it, compiled to the one form the workers take: a
// GBNF grammar (common/grammar). Every API (the REST gateway's response_format and
// extension fields, the gRPC GenerationOptions.structured_output) fills a StructuredOutput
// and calls CompileStructuredOutput, so a constraint has one meaning and one set of errors.
//
//   StructuredOutput so{.kind = StructuredOutput::Kind::kJsonSchema, .field = "response_format",
//                       .text = R"({"type": "object", ...})"};
//   absl::StatusOr<std::string> gbnf = CompileStructuredOutput(so);  // -> request.grammar
//
// Errors are InvalidField(so.field, ...) naming the problem and its place: the schema's
// JSON pointer and keyword, the regex's offset, the grammar's line and column. Compiled
// results are cached by (kind, text) in a bounded LRU, so a repeated schema costs a lookup.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::serving {

struct StructuredOutput {
  enum class Kind {
    kNone,
    kJsonObject,  // any JSON object (JSON mode)
    kJsonSchema,  // `text` is the schema (JSON)
    kRegex,       // `text` is the regular expression, matched against the whole output
    kChoice,      // the output is exactly one of `choices`
    kGrammar,     // `text` is a GBNF grammar (llama-server's format), start rule `root`
  };
  Kind kind = Kind::kNone;
  // The request field the constraint came from, for errors ("response_format",
  // "structured_outputs.json", "grammar", ...).
  std::string field;
  std::string text;
  std::vector<std::string> choices;
  // JSON kinds: no optional whitespace between JSON tokens (vLLM's disable_any_whitespace).
  bool compact_json = false;
};

// Bounds on what a request's constraint may cost to compile.
inline constexpr size_t kMaxStructuredOutputBytes = 256 * 1024;  // schema / regex / grammar text
inline constexpr size_t kMaxChoices = 1024;

// The GBNF grammar for `so` ("" for kNone), parsed once here so that a worker never meets
// an invalid grammar. INVALID_ARGUMENT (InvalidField of so.field) for a bad or too large
// constraint.
absl::StatusOr<std::string> CompileStructuredOutput(const StructuredOutput& so);

}  // namespace tessera::serving
