// The GBNF grammar of JSON mode: any JSON object (RFC 8259), strings as valid UTF-8 without
// raw control characters, and at most 20 whitespace bytes between two tokens, so that a
// model cannot stall in whitespace forever.
#pragma once

#include <string_view>

namespace tessera::grammar {

inline constexpr std::string_view kJsonObjectGbnf = R"gbnf(
# A JSON object, optionally followed by whitespace.
root     ::= object
value    ::= object | array | string | number | ( "true" | "false" | "null" ) ws
object   ::= "{" ws ( member ( "," ws member )* )? "}" ws
member   ::= string ":" ws value
array    ::= "[" ws ( value ( "," ws value )* )? "]" ws
string   ::= "\"" char* "\"" ws
char     ::= [^"\\\x00-\x1F] | "\\" escape
escape   ::= ["\\/bfnrt] | "u" [0-9a-fA-F]{4}
number   ::= "-"? integer fraction? exponent? ws
integer  ::= "0" | [1-9] [0-9]*
fraction ::= "." [0-9]+
exponent ::= [eE] [-+]? [0-9]+
ws       ::= [ \t\n\r]{0,20}
)gbnf";

}  // namespace tessera::grammar
