#include "common/chat/methods.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/chat/call_args.h"
#include "common/chat/py_format.h"
#include "common/chat/py_string.h"
#include "common/chat/taint.h"
#include "common/chat/template_error.h"

namespace tessera::chat {
namespace {

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  return TypeName(v) + " object";
}

Value MissingAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined(
      absl::StrCat("'", ObjectTypeRepr(obj), "' has no attribute '", name, "'"));
}

[[noreturn]] void Unsafe(const Value& obj, const std::string& name) {
  throw TemplateError("SecurityError: access to attribute '" + name + "' of '" + TypeName(obj) +
                      "' object is unsafe.");
}

// Python's str[start:end] bounds for find/startswith/count arguments.
std::string SubstrArgs(const std::string& s, const BoundArgs& a, size_t start_slot,
                       int64_t* offset) {
  *offset = 0;
  if (!a.Has(start_slot) && !a.Has(start_slot + 1)) return s;
  std::u32string cps = DecodeUtf8(s);
  int64_t n = static_cast<int64_t>(cps.size());
  int64_t b = a.Int(start_slot, 0), e = a.Int(start_slot + 1, n);
  if (b < 0) b = std::max<int64_t>(b + n, 0);
  if (e < 0) e = std::max<int64_t>(e + n, 0);
  b = std::min(b, n);
  e = std::min(e, n);
  *offset = b;
  if (e <= b) return "";
  return EncodeUtf8(std::u32string_view(cps).substr(b, e - b));
}

bool AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) {
      throw TemplateError(std::string("TypeError: ") + (prefix ? "startswith" : "endswith") +
                          " first arg must be str or a tuple of str, not " + TypeName(a));
    }
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

Value StringList(const std::vector<std::string>& parts) {
  ValueList out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.emplace_back(p);
  return Value::List(std::move(out));
}

// The pieces of string value `s` at `bounds`, each keeping the spans of its bytes.
Value PieceList(const Value& s, const std::vector<ByteRange>& bounds,
                const std::vector<std::string>& texts) {
  ValueList out;
  out.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    out.push_back(PieceOf(s, bounds[i].first, bounds[i].second, texts[i]));
  }
  return Value::List(std::move(out));
}

bool AllCodePoints(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (char32_t cp : DecodeUtf8(s)) {
    if (!pred(cp)) return false;
  }
  return true;
}

Value CallStringMethod(const Value& self, const std::string& name, CallArgs& args) {
  const std::string& s = self.as_string();
  // Methods that transform the text taint their result as a whole when `self` is tainted.
  const bool tainted = self.taint() != nullptr;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a(name, args, {"chars"});
    const auto [b, e] = PyStripBounds(s, a.String(0), name != "rstrip", name != "lstrip");
    return Substring(self, b, e);
  }
  if (name == "split" || name == "rsplit") {
    BoundArgs a(name, args, {"sep", "maxsplit"});
    const std::optional<std::string> sep = a.String(0);
    const int64_t maxsplit = a.Int(1, -1);
    std::vector<std::string> parts = PySplit(s, sep, maxsplit, name == "rsplit");
    if (!tainted) return StringList(parts);
    return PieceList(self, PySplitBounds(s, sep, maxsplit, name == "rsplit"), parts);
  }
  if (name == "splitlines") {
    std::vector<std::string> lines = PySplitLines(s);
    if (!tainted) return StringList(lines);
    return PieceList(self, PySplitLinesBounds(s), lines);
  }
  if (name == "replace") {
    BoundArgs a(name, args, {"old", "new", "count"});
    const std::string old_sub = a.RequiredString(0);
    a.RequiredString(1);  // `new` must be a str too
    return ReplaceValue(self, old_sub, a.Get(1), a.Int(2, -1));
  }
  if (name == "upper") return WholeIf(PyUpper(s), tainted);
  if (name == "lower" || name == "casefold") return WholeIf(PyLower(s), tainted);
  if (name == "title") return WholeIf(PyTitle(s), tainted);
  if (name == "capitalize") return WholeIf(PyCapitalize(s), tainted);
  if (name == "swapcase") {
    std::string out;
    for (char32_t cp : DecodeUtf8(s))
      AppendUtf8(IsPyUpperCp(cp) ? ToLowerCp(cp) : ToUpperCp(cp), &out);
    return WholeIf(std::move(out), tainted);
  }
  if (name == "startswith" || name == "endswith") {
    BoundArgs a(name, args, {"prefix", "start", "end"});
    int64_t offset;
    return Value(AffixMatch(SubstrArgs(s, a, 1, &offset), a.Get(0), name == "startswith"));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    BoundArgs a(name, args, {"sub", "start", "end"});
    int64_t offset;
    std::string hay = SubstrArgs(s, a, 1, &offset);
    int64_t r = PyFind(hay, a.RequiredString(0), name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) {
      throw TemplateError("ValueError: substring not found");
    }
    return Value(r < 0 ? r : r + offset);
  }
  if (name == "count") {
    BoundArgs a(name, args, {"sub", "start", "end"});
    int64_t offset;
    return Value(PyCount(SubstrArgs(s, a, 1, &offset), a.RequiredString(0)));
  }
  if (name == "join") {
    BoundArgs a(name, args, {"iterable"});
    TrackedText out;
    bool first = true;
    for (const Value& item : Iterate(a.Get(0))) {
      if (!item.is_string()) {
        throw TemplateError("TypeError: sequence item: expected str instance, " + TypeName(item) +
                            " found");
      }
      if (!first) out.Append(self);
      first = false;
      out.Append(item);
    }
    return out.TakeValue();
  }
  if (name == "format") return StrFormatValue(self, args);
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
    return Value(AllCodePoints(s, IsDigitCp));
  if (name == "isalpha") return Value(AllCodePoints(s, IsAlphaCp));
  if (name == "isalnum")
    return Value(AllCodePoints(s, [](char32_t c) { return IsAlphaCp(c) || IsDigitCp(c); }));
  if (name == "isspace") return Value(AllCodePoints(s, IsPySpace));
  if (name == "isupper" || name == "islower") {
    bool upper = name == "isupper", cased = false;
    for (char32_t cp : DecodeUtf8(s)) {
      if (upper ? IsPyLowerCp(cp) : IsPyUpperCp(cp)) return Value(false);
      cased |= upper ? IsPyUpperCp(cp) : IsPyLowerCp(cp);
    }
    return Value(cased);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    BoundArgs a(name, args, {"width", "fillchar"});
    int64_t width = a.Int(0, 0);
    CheckWidth(width);
    const bool fill_given = name != "zfill" && a.String(1).has_value();
    const Value fill = name == "zfill" ? Value("0") : fill_given ? a.Get(1) : Value(" ");
    int64_t n = static_cast<int64_t>(CodePointCount(s));
    if (n >= width) return self;
    int64_t pad = width - n;
    // The padding is template text unless the fill character came from the request.
    TrackedText out;
    auto rep = [&](int64_t k) {
      for (int64_t i = 0; i < k; ++i) out.Append(fill);
    };
    if (name == "ljust") {
      out.Append(self);
      rep(pad);
    } else if (name == "rjust") {
      rep(pad);
      out.Append(self);
    } else if (name == "zfill") {
      const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
      out.AppendPart(self, 0, sign);
      rep(pad);
      out.AppendPart(self, sign, s.size());
    } else {
      // Python centers with the extra space on the right when both lengths are even...
      int64_t left = pad / 2 + (pad & width & 1);
      rep(left);
      out.Append(self);
      rep(pad - left);
    }
    return out.TakeValue();
  }
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs a(name, args, {"affix"});
    std::string x = a.RequiredString(0);
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) {
      return Substring(self, x.size(), s.size());
    }
    if (name == "removesuffix" && x.size() <= s.size() && !x.empty() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Substring(self, 0, s.size() - x.size());
    return self;
  }
  if (name == "partition" || name == "rpartition") {
    BoundArgs a(name, args, {"sep"});
    std::string sep = a.RequiredString(0);
    size_t f = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos) {
      if (name == "partition") return Value::Tuple({self, Value(""), Value("")});
      return Value::Tuple({Value(""), Value(""), self});
    }
    // The separator is both the argument and the matched text of `self`: it is tainted if
    // either is.
    Value matched = a.Get(0).taint() ? a.Get(0) : Substring(self, f, f + sep.size());
    return Value::Tuple(
        {Substring(self, 0, f), std::move(matched), Substring(self, f + sep.size(), s.size())});
  }
  throw TemplateError("'str object' has no attribute '" + name + "'");
}

bool IsStringMethod(const std::string& n) {
  static const char* kNames[] = {
      "strip",     "lstrip",     "rstrip",   "split",    "rsplit",       "splitlines",
      "replace",   "upper",      "lower",    "casefold", "title",        "capitalize",
      "swapcase",  "startswith", "endswith", "find",     "rfind",        "index",
      "rindex",    "count",      "join",     "format",   "isdigit",      "isdecimal",
      "isnumeric", "isalpha",    "isalnum",  "isspace",  "isupper",      "islower",
      "center",    "ljust",      "rjust",    "zfill",    "removeprefix", "removesuffix",
      "partition", "rpartition"};
  return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

Value DictItems(const ValueDict& d) {
  ValueList items;
  items.reserve(d.size());
  for (const auto& [k, v] : d.entries()) items.push_back(Value::Tuple({d.KeyValue(k), v}));
  return Value::List(std::move(items));
}

Value CallDictMethod(const Value& self, const std::string& name, CallArgs& args) {
  const ValueDict& d = self.dict();
  if (name == "items") return DictItems(d);
  if (name == "keys" || name == "values") {
    ValueList out;
    for (const auto& [k, v] : d.entries()) out.push_back(name == "keys" ? d.KeyValue(k) : v);
    return Value::List(std::move(out));
  }
  if (name == "get") {
    BoundArgs a(name, args, {"key", "default"});
    const Value& key = a.Get(0);
    const Value* found = key.is_string() ? d.Find(key.as_string()) : nullptr;
    return found ? *found : a.Or(1, Value::None());
  }
  if (name == "copy") return Value::Dict(d);
  throw TemplateError("'dict object' has no attribute '" + name + "'");
}

Value CallListMethod(const Value& self, const std::string& name, CallArgs& args) {
  const ValueList& l = self.list();
  if (name == "index" || name == "count") {
    BoundArgs a(name, args, {"value"});
    int64_t count = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!Equals(l[i], a.Get(0))) continue;
      if (name == "index") return Value(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") throw TemplateError("ValueError: value is not in list");
    return Value(count);
  }
  if (name == "copy") return self;
  throw TemplateError("'list object' has no attribute '" + name + "'");
}

bool IsIn(const std::string& n, std::initializer_list<const char*> names) {
  for (const char* x : names) {
    if (n == x) return true;
  }
  return false;
}

}  // namespace

void ThrowUndefined(const Value& v) { throw TemplateError(v.undefined_message()); }

Value GetAttribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) ThrowUndefined(obj);
  // The sandbox hides private and dunder attributes.
  if (!name.empty() && name[0] == '_') return MissingAttribute(obj, name);
  switch (obj.kind()) {
    case Value::Kind::kString:
      if (IsStringMethod(name)) {
        return Value::Function(
            name, [obj, name](CallArgs& args) { return CallStringMethod(obj, name, args); });
      }
      break;
    case Value::Kind::kDict:
      if (IsIn(name, {"items", "keys", "values", "get", "copy"})) {
        return Value::Function(
            name, [obj, name](CallArgs& args) { return CallDictMethod(obj, name, args); });
      }
      if (IsIn(name, {"update", "pop", "popitem", "setdefault", "clear"})) Unsafe(obj, name);
      if (const Value* v = obj.dict().Find(name)) return *v;
      break;
    case Value::Kind::kNamespace:
      if (const Value* v = obj.namespace_attrs().Find(name)) return *v;
      break;
    case Value::Kind::kList:
      if (IsIn(name, {"index", "count", "copy"})) {
        return Value::Function(
            name, [obj, name](CallArgs& args) { return CallListMethod(obj, name, args); });
      }
      if (IsIn(name, {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"}))
        Unsafe(obj, name);
      break;
    default:
      break;
  }
  return MissingAttribute(obj, name);
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) ThrowUndefined(obj);
  if (key.is_string()) {
    if (obj.is_dict()) {
      if (const Value* v = obj.dict().Find(key.as_string())) return *v;
    }
    return GetAttribute(obj, key.as_string());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t n = Length(obj);
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (obj.is_list()) return obj.list()[i];
      std::u32string cps = DecodeUtf8(obj.as_string());
      return PickCodePoints(obj, cps, {i});
    }
  }
  return Value::Undefined(absl::StrCat("'", ObjectTypeRepr(obj), "' has no element ", Repr(key)));
}

ValueList Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.list();
    case Value::Kind::kDict: {
      ValueList keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, x] : v.dict().entries()) keys.push_back(v.dict().KeyValue(k));
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      std::string one;
      const std::u32string cps = DecodeUtf8(v.as_string());
      const std::vector<size_t> at =
          v.taint() ? CodePointOffsets(v.as_string()) : std::vector<size_t>();
      for (size_t i = 0; i < cps.size(); ++i) {
        one.clear();
        AppendUtf8(cps[i], &one);
        chars.push_back(at.empty() ? Value(one) : WholeIf(one, Overlaps(v, at[i], at[i + 1])));
      }
      return chars;
    }
    default:
      throw TemplateError("TypeError: '" + TypeName(v) + "' object is not iterable");
  }
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw TemplateError("TypeError: 'in <string>' requires string as left operand, not " +
                            TypeName(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& x : container.list()) {
        if (Equals(x, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.dict().Find(item.as_string()) != nullptr;
    default:
      throw TemplateError("TypeError: argument of type '" + TypeName(container) +
                          "' is not iterable");
  }
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(v.as_string()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      throw TemplateError("TypeError: object of type '" + TypeName(v) + "' has no len()");
  }
}

}  // namespace tessera::chat
