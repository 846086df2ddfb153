// Choices -> GBNF, for structured output that must be one of a list of strings (vLLM's
// guided_choice).
//
//   absl::StatusOr<std::string> gbnf = ChoicesToGbnf({"positive", "negative"});
//   // root ::= "positive" | "negative"
//
// The output is one of the strings exactly, nothing before or after. Duplicates are kept
// once. Errors (InvalidArgument): an empty list, a choice that is not valid UTF-8 ("choice 2
// is not valid UTF-8"), more than 10,000 choices or more than 1 MiB of text in all.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tessera::grammar {

absl::StatusOr<std::string> ChoicesToGbnf(absl::Span<const std::string> choices);

}  // namespace tessera::grammar
