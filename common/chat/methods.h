// Attribute and item access, iteration, membership and length with the semantics of Jinja2's
// sandboxed environment over Python objects: `obj.name` finds methods first (so `d.items`
// is dict.items), then dict keys; a missing key or attribute is Undefined; anything done to
// an Undefined other than printing, testing or iterating raises its "is undefined" error.
#pragma once

#include <string>

#include "common/chat/value.h"

namespace tessera::chat {

[[noreturn]] void ThrowUndefined(const Value& v);

// obj.name (bound methods of str, dict and list included).
Value GetAttribute(const Value& obj, const std::string& name);
// obj[key]: list/str index (negative counts from the end), dict key, or attribute fallback.
Value GetItem(const Value& obj, const Value& key);
// The items `for x in v` visits: list items, dict keys, str characters; Undefined is empty.
ValueList Iterate(const Value& v);
// `item in container`.
bool Contains(const Value& container, const Value& item);
// len(v); Undefined has length 0.
int64_t Length(const Value& v);

}  // namespace tessera::chat
