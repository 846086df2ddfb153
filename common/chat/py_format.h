// Python's string formatting as templates use it: `fmt % args`, str.format, format specs,
// and time.strftime.
#pragma once

#include <ctime>
#include <string>

#include "common/chat/value.h"

namespace tessera::chat {

// `fmt % args`: a list is a tuple of arguments, a dict feeds %(name)s, anything else is the
// single argument. Throws TemplateError on a malformed format or an argument count mismatch.
std::string PercentFormat(const std::string& fmt, const Value& args);

// fmt.format(*positional, **keyword) with fields {}, {0}, {name}, {0.attr}, {0[key]}, !r/!s
// conversions and format specs.
std::string StrFormat(const std::string& fmt, const CallArgs& args);

// The two above on a string value, keeping provenance (common/chat/taint.h): a string argument
// printed as it is (%s, %c, a field without spec) lands with its spans, any other argument's
// text is tainted as a whole when it holds request data, and a tainted format string taints
// the whole result.
Value PercentFormatValue(const Value& fmt, const Value& args);
Value StrFormatValue(const Value& fmt, const CallArgs& args);

// format(value, spec): Python's format specification mini-language for str, int, float.
std::string FormatWithSpec(const Value& v, const std::string& spec);

// time.strftime(fmt, t) (glibc strftime, as CPython uses on Linux).
std::string Strftime(const std::string& fmt, const std::tm& t);

}  // namespace tessera::chat
