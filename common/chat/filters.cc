#include "common/chat/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/chat/call_args.h"
#include "common/chat/json_dump.h"
#include "common/chat/methods.h"
#include "common/chat/operators.h"
#include "common/chat/py_format.h"
#include "common/chat/py_string.h"
#include "common/chat/taint.h"
#include "common/chat/template_error.h"
#include "common/chat/tests.h"

namespace tessera::chat {
namespace {

constexpr const char* kFilters[] = {
    "abs",      "attr",       "batch",    "capitalize", "center",  "count",   "d",      "default",
    "dictsort", "e",          "escape",   "first",      "float",   "format",  "indent", "int",
    "items",    "join",       "last",     "length",     "list",    "lower",   "map",    "max",
    "min",      "pprint",     "reject",   "rejectattr", "replace", "reverse", "round",  "safe",
    "select",   "selectattr", "sort",     "string",     "sum",     "title",   "tojson", "trim",
    "unique",   "upper",      "wordcount"};

CallArgs Rest(const CallArgs& args, size_t skip) {
  CallArgs r;
  for (size_t i = skip; i < args.positional.size(); ++i) r.positional.push_back(args.positional[i]);
  r.keyword = args.keyword;
  return r;
}

// Jinja2's make_attrgetter: "a.b.0" walks items, an all-digit part is an index.
Value AttrGet(const Value& item, const std::string& path, const Value* dflt) {
  Value v = item;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = digits ? GetItem(v, Value(ParseDecimal(part, "index"))) : GetItem(v, Value(part));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  if (dflt && v.is_undefined()) return *dflt;
  return v;
}

std::string AttributeArg(const Value& v) {
  if (v.is_int()) return std::to_string(v.as_int());
  if (!v.is_string()) throw TemplateError("TypeError: attribute must be a string");
  return v.as_string();
}

// The key a case-insensitive sort/unique compares: lowercased strings.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(PyLower(v.as_string()));
  return v;
}

Value SelectOrReject(const Value& seq, const CallArgs& args, bool by_attr, bool select) {
  size_t off = by_attr ? 1 : 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty()) throw TemplateError("selectattr/rejectattr needs an attribute");
    attr = AttributeArg(args.positional[0]);
  }
  bool has_test = args.positional.size() > off;
  std::string test = has_test ? ToStr(args.positional[off]) : "";
  CallArgs test_args = Rest(args, off + 1);
  ValueList out;
  for (const Value& item : Iterate(seq)) {
    Value subject = by_attr ? AttrGet(item, attr, nullptr) : item;
    bool ok = has_test ? CallTest(test, subject, test_args) : Truthy(subject);
    if (ok == select) out.push_back(item);
  }
  return Value::List(std::move(out));
}

Value Map(const Value& seq, const CallArgs& args) {
  ValueList out;
  if (args.positional.empty()) {
    const Value* attr = nullptr;
    const Value* dflt = nullptr;
    for (const auto& [k, v] : args.keyword) {
      if (k == "attribute") {
        attr = &v;
      } else if (k == "default") {
        dflt = &v;
      } else {
        throw TemplateError("map: unexpected keyword argument '" + k + "'");
      }
    }
    if (attr == nullptr) throw TemplateError("map requires a filter argument");
    std::string path = AttributeArg(*attr);
    for (const Value& item : Iterate(seq)) out.push_back(AttrGet(item, path, dflt));
    return Value::List(std::move(out));
  }
  std::string filter = ToStr(args.positional[0]);
  CallArgs rest = Rest(args, 1);
  for (const Value& item : Iterate(seq)) out.push_back(CallFilter(filter, item, rest));
  return Value::List(std::move(out));
}

ValueList SortedBy(ValueList items, bool case_sensitive, const std::optional<std::string>& attr,
                   bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) {
    Value key = attr ? AttrGet(item, *attr, nullptr) : item;
    keyed.emplace_back(SortKey(key, case_sensitive), std::move(item));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? Compare(b.first, a.first) < 0 : Compare(a.first, b.first) < 0;
  });
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

// Python round(x, n) on a float: correctly rounded from the exact binary value, ties to even
// (glibc's printf rounds the same way).
double PyRound(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits < 0) {
    double p = std::pow(10.0, static_cast<double>(-ndigits));
    return std::nearbyint(x / p) * p;
  }
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::min<int64_t>(ndigits, 300)), x);
  return std::strtod(buf, nullptr);
}

Value IntFilter(const Value& v, const BoundArgs& a) {
  Value dflt = a.Or(0, Value(int64_t{0}));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double())) return dflt;
    return Value(TruncToInt(v.as_double()));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.as_string(), std::nullopt, true, true);
    std::string digits;
    for (char c : s) {
      if (c != '_') digits.push_back(c);
    }
    int base = static_cast<int>(a.Int(1, 10));
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(digits.c_str(), &end, base);
    if (!digits.empty() && end && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(n));
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && std::isfinite(d)) {
      return Value(TruncToInt(d));
    }
  }
  return dflt;
}

Value FloatFilter(const Value& v, const BoundArgs& a) {
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = PyStrip(v.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(d);
  }
  return a.Or(0, Value(0.0));
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string Indent(const std::string& text, const Value& width, bool first, bool blank) {
  std::string ind;
  if (width.is_string()) {
    ind = width.as_string();
  } else {
    CheckWidth(width.as_int());
    ind = std::string(static_cast<size_t>(std::max<int64_t>(width.as_int(), 0)), ' ');
  }
  std::vector<std::string> lines = PySplitLines(text + "\n");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv += ind;
      rv += lines[i];
    }
  }
  return first ? ind + rv : rv;
}

Value ToJson(const Value& v, const BoundArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = a.Bool(0, false);
  if (a.Has(1) && !a.Get(1).is_none()) {
    const Value& ind = a.Get(1);
    o.indent = ind.is_string()
                   ? ind.as_string()
                   : std::string(static_cast<size_t>(std::max<int64_t>(ind.as_int(), 0)), ' ');
  }
  if (a.Has(2) && !a.Get(2).is_none()) {
    const Value& sep = a.Get(2);
    if (!sep.is_list() || sep.list().size() != 2 || !sep.list()[0].is_string() ||
        !sep.list()[1].is_string()) {
      throw TemplateError("tojson: separators must be a pair of strings");
    }
    o.item_separator = sep.list()[0].as_string();
    o.key_separator = sep.list()[1].as_string();
  }
  o.sort_keys = a.Bool(3, false);
  std::string out = JsonDumps(v, o);
  // JSON escapes and quotes the request's text: no longer byte for byte, so all of it counts.
  const bool tainted = ContainsTaint(v) || (a.Has(1) && ContainsTaint(a.Get(1))) ||
                       (a.Has(2) && ContainsTaint(a.Get(2)));
  return WholeIf(std::move(out), tainted);
}

}  // namespace

bool IsKnownFilter(const std::string& name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

Value CallFilter(const std::string& name, const Value& v, const CallArgs& args) {
  if (name == "default" || name == "d") {
    BoundArgs a(name, args, {"default_value", "boolean"});
    bool use_default = v.is_undefined() || (a.Bool(1, false) && !Truthy(v));
    return use_default ? a.Or(0, Value("")) : v;
  }
  if (name == "length" || name == "count") return Value(Length(v));
  if (name == "safe") return v;
  if (name == "string") return StrValue(v);
  if (name == "pprint") return ReprValue(v);
  if (name == "trim") {
    BoundArgs a(name, args, {"chars"});
    const Value text = StrValue(v);
    const auto [b, e] = PyStripBounds(text.as_string(), a.String(0), true, true);
    return Substring(text, b, e);
  }
  // Filters below that rewrite the text taint their result as a whole (common/chat/taint.h).
  if (name == "upper") return WholeIf(PyUpper(ToStr(v)), ContainsTaint(v));
  if (name == "lower") return WholeIf(PyLower(ToStr(v)), ContainsTaint(v));
  if (name == "capitalize") return WholeIf(PyCapitalize(ToStr(v)), ContainsTaint(v));
  if (name == "title") {
    // Jinja2's title: a word starts after spaces, '-', or an opening bracket.
    std::string out;
    bool start = true;
    for (char32_t cp : DecodeUtf8(ToStr(v))) {
      bool sep = IsPySpace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
      AppendUtf8(sep ? cp : start ? ToUpperCp(cp) : ToLowerCp(cp), &out);
      start = sep;
    }
    return WholeIf(std::move(out), ContainsTaint(v));
  }
  if (name == "escape" || name == "e") return WholeIf(HtmlEscape(ToStr(v)), ContainsTaint(v));
  if (name == "replace") {
    BoundArgs a(name, args, {"old", "new", "count"});
    return ReplaceValue(StrValue(v), ToStr(a.Get(0)), StrValue(a.Get(1)), a.Int(2, -1));
  }
  if (name == "center") {
    BoundArgs a(name, args, {"width"});
    CallArgs c;
    c.positional.push_back(Value(a.Int(0, 80)));
    return GetAttribute(StrValue(v), "center").callable().call(c);
  }
  if (name == "indent") {
    BoundArgs a(name, args, {"width", "first", "blank"});
    const Value width = a.Or(0, Value(int64_t{4}));
    return WholeIf(Indent(ToStr(v), width, a.Bool(1, false), a.Bool(2, false)),
                   ContainsTaint(v) || ContainsTaint(width));
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (char32_t cp : DecodeUtf8(ToStr(v))) {
      bool w = IsAlphaCp(cp) || IsDigitCp(cp) || cp == '_';
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "format") {
    if (!args.keyword.empty()) {
      ValueDict d;
      for (const auto& [k, x] : args.keyword) d.Set(k, x);
      return PercentFormatValue(StrValue(v), Value::Dict(std::move(d)));
    }
    return PercentFormatValue(StrValue(v), Value::Tuple(args.positional));
  }
  if (name == "first" || name == "last") {
    ValueList items = Iterate(v);
    if (items.empty()) {
      return Value::Undefined(std::string("No ") + name + " item, sequence was empty.");
    }
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::List(Iterate(v));
  if (name == "items") {
    if (v.is_undefined()) return Value::List({});
    if (!v.is_dict()) throw TemplateError("TypeError: Can only get item pairs from a mapping.");
    CallArgs none;
    return GetAttribute(v, "items").callable().call(none);
  }
  if (name == "join") {
    BoundArgs a(name, args, {"d", "attribute"});
    const Value sep = a.Has(0) ? StrValue(a.Get(0)) : Value("");
    std::optional<std::string> attr;
    if (a.Has(1)) attr = AttributeArg(a.Get(1));
    TrackedText out;
    bool first = true;
    for (const Value& item : Iterate(v)) {
      if (!first) out.Append(sep);
      first = false;
      out.AppendStr(attr ? AttrGet(item, *attr, nullptr) : item);
    }
    return out.TakeValue();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      const std::u32string cps = DecodeUtf8(v.as_string());
      std::vector<int64_t> backwards(cps.size());
      for (size_t i = 0; i < cps.size(); ++i)
        backwards[i] = static_cast<int64_t>(cps.size() - 1 - i);
      return PickCodePoints(v, cps, backwards);
    }
    ValueList items = Iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) {
      return Value(v.as_int() < 0 ? CheckedSub(0, v.as_int()) : v.as_int());
    }
    throw TemplateError("TypeError: bad operand type for abs(): '" + TypeName(v) + "'");
  }
  if (name == "int") return IntFilter(v, BoundArgs(name, args, {"default", "base"}));
  if (name == "float") return FloatFilter(v, BoundArgs(name, args, {"default"}));
  if (name == "round") {
    BoundArgs a(name, args, {"precision", "method"});
    int64_t precision = a.Int(0, 0);
    std::string method = a.String(1).value_or("common");
    if (!v.is_number()) throw TemplateError("TypeError: round() needs a number");
    if (method == "common") {
      if (!v.is_float()) return Value(v.as_int());  // Python round(int, n) stays an int
      return Value(PyRound(v.as_double(), precision));
    }
    double p = std::pow(10.0, static_cast<double>(precision));
    if (method == "ceil") return Value(std::ceil(v.as_double() * p) / p);
    if (method == "floor") return Value(std::floor(v.as_double() * p) / p);
    throw TemplateError("round: method must be 'common', 'ceil' or 'floor'");
  }
  if (name == "tojson") {
    return ToJson(v, BoundArgs(name, args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  }
  if (name == "attr") {
    // Only real attributes (methods, namespace members): never a dict's keys.
    BoundArgs a(name, args, {"name"});
    std::string attr = ToStr(a.Get(0));
    if (v.is_dict()) {
      Value key_free = GetAttribute(Value::Dict(ValueDict()), attr);
      if (key_free.is_undefined()) return GetAttribute(Value::None(), attr);
      return GetAttribute(v, attr);
    }
    return GetAttribute(v, attr);
  }
  if (name == "map") return Map(v, args);
  if (name == "select" || name == "reject") return SelectOrReject(v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") {
    return SelectOrReject(v, args, true, name == "selectattr");
  }
  if (name == "sort") {
    BoundArgs a(name, args, {"reverse", "case_sensitive", "attribute"});
    std::optional<std::string> attr;
    if (a.Has(2)) attr = AttributeArg(a.Get(2));
    return Value::List(SortedBy(Iterate(v), a.Bool(1, false), attr, a.Bool(0, false)));
  }
  if (name == "dictsort") {
    BoundArgs a(name, args, {"case_sensitive", "by", "reverse"});
    if (!v.is_dict()) throw TemplateError("TypeError: dictsort needs a mapping");
    std::string by = a.String(1).value_or("key");
    ValueList pairs = Iterate(CallFilter("items", v, CallArgs{}));
    return Value::List(
        SortedBy(std::move(pairs), a.Bool(0, false), by == "value" ? "1" : "0", a.Bool(2, false)));
  }
  if (name == "unique") {
    BoundArgs a(name, args, {"case_sensitive", "attribute"});
    std::optional<std::string> attr;
    if (a.Has(1)) attr = AttributeArg(a.Get(1));
    ValueList out, seen;
    for (const Value& item : Iterate(v)) {
      Value key = SortKey(attr ? AttrGet(item, *attr, nullptr) : item, a.Bool(0, false));
      bool dup = false;
      for (const Value& s : seen) dup = dup || Equals(s, key);
      if (dup) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::List(std::move(out));
  }
  if (name == "min" || name == "max") {
    BoundArgs a(name, args, {"case_sensitive", "attribute"});
    std::optional<std::string> attr;
    if (a.Has(1)) attr = AttributeArg(a.Get(1));
    ValueList items = Iterate(v);
    if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    ValueList sorted = SortedBy(items, a.Bool(0, false), attr, false);
    if (name == "min") return sorted.front();
    // max returns the first of equal maxima, as Python's max does.
    Value best = items.front();
    Value best_key = SortKey(attr ? AttrGet(best, *attr, nullptr) : best, a.Bool(0, false));
    for (const Value& item : items) {
      Value key = SortKey(attr ? AttrGet(item, *attr, nullptr) : item, a.Bool(0, false));
      if (Compare(key, best_key) > 0) {
        best = item;
        best_key = key;
      }
    }
    return best;
  }
  if (name == "sum") {
    BoundArgs a(name, args, {"attribute", "start"});
    std::optional<std::string> attr;
    if (a.Has(0)) attr = AttributeArg(a.Get(0));
    Value total = a.Or(1, Value(int64_t{0}));
    for (const Value& item : Iterate(v)) {
      Value x = attr ? AttrGet(item, *attr, nullptr) : item;
      if (!x.is_number() || !total.is_number()) {
        throw TemplateError("TypeError: unsupported operand type(s) for +: '" + TypeName(total) +
                            "' and '" + TypeName(x) + "'");
      }
      total = (x.is_float() || total.is_float()) ? Value(total.as_double() + x.as_double())
                                                 : Value(CheckedAdd(total.as_int(), x.as_int()));
    }
    return total;
  }
  if (name == "batch") {
    BoundArgs a(name, args, {"linecount", "fill_with"});
    int64_t n = a.Int(0, 1);
    if (n <= 0) throw TemplateError("batch: linecount must be positive");
    ValueList out, row;
    for (const Value& item : Iterate(v)) {
      row.push_back(item);
      if (static_cast<int64_t>(row.size()) == n) {
        out.push_back(Value::List(std::move(row)));
        row.clear();
      }
    }
    if (!row.empty()) {
      if (a.Has(1)) {
        while (static_cast<int64_t>(row.size()) < n) row.push_back(a.Get(1));
      }
      out.push_back(Value::List(std::move(row)));
    }
    return Value::List(std::move(out));
  }
  throw TemplateError("no filter named '" + name + "'");
}

}  // namespace tessera::chat
