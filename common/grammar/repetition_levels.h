// Where the copies of a bounded repetition look alike to a short token.
//
// ParseGbnf lowers x{m,n} to m copies of x in a row followed by n-m nested optional rules
// (R1 ::= x | "", Ri ::= x R(i-1) | ""), so every copy is a position of its own, and every
// stack context inside a copy would be classified over the whole vocabulary again. Yet a
// token of at most `horizon` bytes cannot tell copy i from copy j once both leave at least
// `horizon` + 1 copies to go: a non-empty copy takes at least one byte, so within `horizon`
// bytes no path reaches the end of either repetition (mandatory copies), or every path that
// ends it early is open to both (optional copies).
//
// CanonicalPositions maps every position to an equivalent one for that horizon: a position
// in a run of identical elements with more than horizon + 1 of them still to go maps to
// the same place horizon + 1 elements before the run's end; a position in a chain rule of
// level above horizon + 1 (level = how many optional copies the rule still allows) maps to
// the same offset in the chain's rule of level horizon + 1, provided the two rules have the
// same FOLLOW set. Every other position maps to itself. The walk of any byte string of at
// most `horizon` bytes from a stack behaves the same after each frame is mapped (accepted,
// dead at the same byte, popping out at the same bytes), so a classification made at the
// mapped context is exact for tokens it decides within `horizon` bytes. Linear in the
// grammar apart from a sort of the chain rules.
#pragma once

#include <cstdint>
#include <vector>

#include "common/grammar/grammar.h"

namespace tessera::grammar {

std::vector<uint32_t> CanonicalPositions(const Grammar& grammar, uint32_t horizon);

}  // namespace tessera::grammar
