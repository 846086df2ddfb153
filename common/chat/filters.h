// Jinja2's built-in filters (with HuggingFace's `tojson`), applied to engine values.
#pragma once

#include <string>

#include "common/chat/value.h"

namespace tessera::chat {

// `subject | name(args)`. Throws TemplateError for bad arguments or an unknown filter.
Value CallFilter(const std::string& name, const Value& subject, const CallArgs& args);
bool IsKnownFilter(const std::string& name);

}  // namespace tessera::chat
