// Jinja2's built-in tests (`x is defined`, `x is divisibleby 3`...).
#pragma once

#include <string>

#include "common/chat/value.h"

namespace tessera::chat {

// `subject is name(args)`. Throws TemplateError for bad arguments or an unknown test.
bool CallTest(const std::string& name, const Value& subject, const CallArgs& args);
bool IsKnownTest(const std::string& name);

}  // namespace tessera::chat
