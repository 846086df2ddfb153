#include "common/chat/py_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/chat/methods.h"
#include "common/chat/operators.h"
#include "common/chat/py_string.h"
#include "common/chat/taint.h"
#include "common/chat/template_error.h"

namespace tessera::chat {
namespace {

// `s` padded to `width` code points; *left_bytes (when given) is how many bytes of padding
// precede `s`.
std::string Pad(const std::string& s, size_t width, char align, const std::string& fill,
                size_t* left_bytes = nullptr) {
  size_t n = CodePointCount(s);
  if (left_bytes) *left_bytes = 0;
  if (n >= width) return s;
  size_t pad = width - n;
  auto rep = [&](size_t k) {
    std::string r;
    for (size_t i = 0; i < k; ++i) r += fill;
    return r;
  };
  if (align == '<') return s + rep(pad);
  std::string left = rep(align == '^' ? pad / 2 : pad);
  if (left_bytes) *left_bytes = left.size();
  if (align == '^') return left + s + rep(pad - pad / 2);
  return left + s;
}

template <typename T>
std::string CFormatAny(const std::string& spec, T v) {
  int n = std::snprintf(nullptr, 0, spec.c_str(), v);
  if (n < 0) throw TemplateError("ValueError: bad format '" + spec + "'");
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec.c_str(), v);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string CFormat(const std::string& spec, double d) { return CFormatAny(spec, d); }
std::string CFormatInt(const std::string& spec, long long i) { return CFormatAny(spec, i); }

// A width or precision written in a format string.
int64_t FormatNumber(const std::string& digits) {
  if (digits.empty()) return 0;
  int64_t n = ParseDecimal(digits, "format width");
  CheckWidth(n);
  return n;
}

double RequireNumber(const Value& v, char type) {
  if (!v.is_number()) {
    throw TemplateError(std::string("TypeError: %") + type +
                        " format: a real number is required, not " + TypeName(v));
  }
  return v.as_double();
}

// `fmt % args` into `out`: literal text untainted, each argument with its taint.
void PercentFormatInto(const std::string& fmt, const Value& args, TrackedText* out) {
  std::vector<Value> positional;
  const ValueDict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.list();
  } else if (args.is_dict()) {
    mapping = &args.dict();
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) {
      throw TemplateError("TypeError: not enough arguments for format string");
    }
    return positional[next++];
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      const size_t next_percent = std::min(fmt.find('%', i), fmt.size());
      out->Append(std::string_view(fmt).substr(i, next_percent - i));
      i = next_percent - 1;
      continue;
    }
    if (++i >= fmt.size()) throw TemplateError("ValueError: incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || mapping == nullptr) {
        throw TemplateError("TypeError: format requires a mapping");
      }
      const Value* found = mapping->Find(fmt.substr(i + 1, close - i - 1));
      if (found == nullptr) throw TemplateError("KeyError: " + fmt.substr(i + 1, close - i - 1));
      arg = found;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ 0#").find(fmt[i]) != std::string::npos) {
      flags.push_back(fmt[i++]);
    }
    std::string width, precision;
    bool has_precision = false;
    if (i < fmt.size() && fmt[i] == '*') {
      int64_t w = take().as_int();
      if (w < 0) {
        flags.push_back('-');
        w = -w;
      }
      width = std::to_string(w);
      ++i;
    }
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) width += fmt[i++];
    if (i < fmt.size() && fmt[i] == '.') {
      has_precision = true;
      ++i;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
        precision += fmt[i++];
    }
    width = width.empty() ? "" : std::to_string(FormatNumber(width));
    precision = precision.empty() ? "" : std::to_string(FormatNumber(precision));
    if (i >= fmt.size()) throw TemplateError("ValueError: incomplete format");
    char type = fmt[i];
    if (type == '%') {
      out->Append("%");
      continue;
    }
    const Value& v = arg ? *arg : take();
    std::string spec = "%" + flags + width + (has_precision ? "." + precision : "");
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = type == 's' ? ToStr(v) : Repr(v);
        if (has_precision) {
          std::u32string cps = DecodeUtf8(s);
          size_t p = static_cast<size_t>(FormatNumber(precision));
          if (cps.size() > p) s = EncodeUtf8(std::u32string_view(cps).substr(0, p));
        }
        size_t w = static_cast<size_t>(FormatNumber(width));
        size_t left = 0;
        std::string padded =
            Pad(s, w, flags.find('-') != std::string::npos ? '<' : '>', " ", &left);
        if (type == 's' && v.is_string() && v.taint() != nullptr) {
          // The (possibly cut) text of a string argument lands byte for byte after the padding.
          out->Append(std::string_view(padded).substr(0, left));
          out->Append(PieceOf(v, 0, s.size(), s));
          out->Append(std::string_view(padded).substr(left + s.size()));
        } else {
          out->Append(padded, ContainsTaint(v));
        }
        break;
      }
      case 'd':
      case 'i':
      case 'u': {
        double d = RequireNumber(v, type);
        long long n = v.is_float() ? TruncToInt(d) : v.as_int();
        out->Append(CFormatInt(spec + "lld", n));
        break;
      }
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_int() && !v.is_bool()) {
          throw TemplateError(std::string("TypeError: %") + type +
                              " format: an integer is required, not " + TypeName(v));
        }
        long long n = v.as_int();
        // The magnitude as unsigned: -n overflows for the most negative int.
        unsigned long long mag = n < 0 ? 0ULL - static_cast<unsigned long long>(n) : n;
        char buf[32];
        std::snprintf(buf, sizeof(buf), type == 'x' ? "%llx" : type == 'X' ? "%llX" : "%llo", mag);
        std::string digits = buf;
        if (flags.find('#') != std::string::npos) digits = std::string("0") + type + digits;
        size_t w = static_cast<size_t>(FormatNumber(width));
        std::string body = n < 0 ? "-" + digits : digits;
        bool left = flags.find('-') != std::string::npos;
        if (!left && flags.find('0') != std::string::npos && body.size() < w) {
          body.insert(n < 0 ? 1 : 0, std::string(w - body.size(), '0'));
        }
        out->Append(Pad(body, w, left ? '<' : '>', " "));
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        out->Append(CFormat(spec + type, RequireNumber(v, type)));
        break;
      case 'c':
        if (v.is_string()) {
          out->Append(v);
        } else {
          RequireNumber(v, type);
          int64_t cp = v.is_float() ? TruncToInt(v.as_double()) : v.as_int();
          if (cp < 0 || cp > 0x10FFFF) throw TemplateError("OverflowError: %c arg not in range");
          std::string one;
          AppendUtf8(static_cast<char32_t>(cp), &one);
          out->Append(one);
        }
        break;
      default:
        throw TemplateError(std::string("ValueError: unsupported format character '") + type + "'");
    }
  }
  if (mapping == nullptr && next < positional.size()) {
    throw TemplateError("TypeError: not all arguments converted during string formatting");
  }
}

}  // namespace

std::string FormatWithSpec(const Value& v, const std::string& spec) {
  size_t i = 0;
  std::string fill = " ";
  char align = '\0';
  std::u32string cps = DecodeUtf8(spec);
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (cps.size() >= 2 && is_align(cps[1])) {
    fill = EncodeUtf8(cps.substr(0, 1));
    align = static_cast<char>(cps[1]);
    i = 2;
  } else if (!cps.empty() && is_align(cps[0])) {
    align = static_cast<char>(cps[0]);
    i = 1;
  }
  std::string rest = EncodeUtf8(std::u32string_view(cps).substr(i));
  i = 0;
  char sign = '-';
  if (i < rest.size() && (rest[i] == '+' || rest[i] == '-' || rest[i] == ' ')) sign = rest[i++];
  bool alt = false;
  if (i < rest.size() && rest[i] == '#') {
    alt = true;
    ++i;
  }
  if (i < rest.size() && rest[i] == '0') {
    if (align == '\0') {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  std::string width_digits;
  while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])))
    width_digits += rest[i++];
  size_t width = static_cast<size_t>(FormatNumber(width_digits));
  if (i < rest.size() && (rest[i] == ',' || rest[i] == '_')) {
    throw TemplateError("unsupported: digit grouping in format spec '" + spec + "'");
  }
  int precision = -1;
  if (i < rest.size() && rest[i] == '.') {
    ++i;
    std::string digits;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])))
      digits += rest[i++];
    precision = static_cast<int>(FormatNumber(digits));
  }
  char type = i < rest.size() ? rest[i++] : '\0';
  if (i != rest.size()) throw TemplateError("ValueError: Invalid format specifier '" + spec + "'");

  std::string body;
  bool numeric = v.is_number();
  if (!numeric) {
    if (type != '\0' && type != 's') {
      throw TemplateError(std::string("ValueError: Unknown format code '") + type +
                          "' for object of type '" + TypeName(v) + "'");
    }
    body = ToStr(v);
    if (precision >= 0) {
      std::u32string b = DecodeUtf8(body);
      if (b.size() > static_cast<size_t>(precision)) body = EncodeUtf8(b.substr(0, precision));
    }
    return Pad(body, width, align == '\0' ? '<' : align, fill);
  }
  bool negative = false;
  bool integral =
      (v.is_int() || v.is_bool()) && (type == '\0' || type == 'd' || type == 'n' || type == 'x' ||
                                      type == 'X' || type == 'o' || type == 'b' || type == 'c');
  if (integral) {
    long long n = v.as_int();
    negative = n < 0;
    unsigned long long u = negative ? 0ULL - static_cast<unsigned long long>(n) : n;
    if (type == 'x' || type == 'X' || type == 'o') {
      body = CFormatInt(std::string("%ll") + type, static_cast<long long>(u));
      if (alt) body = std::string("0") + (type == 'o' ? 'o' : type) + body;
    } else if (type == 'b') {
      do {
        body.insert(body.begin(), static_cast<char>('0' + (u & 1)));
        u >>= 1;
      } while (u);
      if (alt) body = "0b" + body;
    } else if (type == 'c') {
      AppendUtf8(static_cast<char32_t>(u), &body);
    } else {
      body = std::to_string(u);
    }
  } else {
    double d = v.as_double();
    negative = std::signbit(d) && !std::isnan(d);
    double a = std::fabs(d);
    if (type == '\0' && precision < 0) {
      body = FloatRepr(a);
    } else if (type == '%') {
      body = CFormat("%." + std::to_string(precision < 0 ? 6 : precision) + "f", a * 100) + "%";
    } else if (type == '\0') {
      body = CFormat("%." + std::to_string(precision == 0 ? 1 : precision) + "g", a);
      if (body.find_first_of(".einf") == std::string::npos) body += ".0";
    } else if (std::string("eEfFgG").find(type) != std::string::npos) {
      body = CFormat(std::string("%") + (alt ? "#" : "") + "." +
                         std::to_string(precision < 0 ? 6 : precision) + type,
                     a);
    } else {
      throw TemplateError(std::string("ValueError: Unknown format code '") + type +
                          "' for object of type '" + TypeName(v) + "'");
    }
  }
  std::string sign_str = negative ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
  if (align == '=') {
    size_t n = CodePointCount(sign_str) + CodePointCount(body);
    std::string padding;
    for (size_t k = n; k < width; ++k) padding += fill;
    return sign_str + padding + body;
  }
  return Pad(sign_str + body, width, align == '\0' ? '>' : align, fill);
}

namespace {

// fmt.format(...) into `out`: literal text untainted, each field with its taint.
void StrFormatInto(const std::string& fmt, const CallArgs& args, TrackedText* out) {
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out->Append("}");
      continue;
    }
    if (c != '{') {
      const size_t next_brace = std::min(fmt.find_first_of("{}", i), fmt.size());
      out->Append(std::string_view(fmt).substr(i, next_brace - i));
      i = next_brace - 1;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out->Append("{");
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) {
      throw TemplateError("ValueError: Single '{' encountered in format string");
    }
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec;
    char conversion = '\0';
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : '\0';
      field.resize(bang);
    }
    size_t head_end = field.find_first_of(".[");
    std::string head = field.substr(0, head_end);
    Value v;
    if (head.empty()) {
      if (auto_index >= args.positional.size()) {
        throw TemplateError("IndexError: Replacement index " + std::to_string(auto_index) +
                            " out of range for positional args tuple");
      }
      v = args.positional[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
      size_t idx = static_cast<size_t>(ParseDecimal(head, "replacement index"));
      if (idx >= args.positional.size()) {
        throw TemplateError("IndexError: Replacement index " + head +
                            " out of range for positional args tuple");
      }
      v = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, val] : args.keyword) {
        if (k == head) {
          v = val;
          found = true;
        }
      }
      if (!found) throw TemplateError("KeyError: '" + head + "'");
    }
    // Attribute and index parts: .name and [key].
    for (size_t p = head_end; p != std::string::npos && p < field.size();) {
      if (field[p] == '.') {
        size_t e = field.find_first_of(".[", p + 1);
        v = GetAttribute(v, field.substr(p + 1, e - p - 1));
        p = e;
      } else {
        size_t e = field.find(']', p);
        if (e == std::string::npos) throw TemplateError("ValueError: Missing ']' in format string");
        std::string key = field.substr(p + 1, e - p - 1);
        bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = digits ? GetItem(v, Value(ParseDecimal(key, "index"))) : GetItem(v, Value(key));
        p = e + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a') {
      v = ReprValue(v);
    } else if (conversion == 's') {
      v = StrValue(v);
    }
    if (spec.empty() && v.is_string()) {
      out->Append(v);  // the text as it is, byte for byte
    } else {
      out->Append(FormatWithSpec(v, spec), ContainsTaint(v));
    }
  }
}

}  // namespace

std::string PercentFormat(const std::string& fmt, const Value& args) {
  TrackedText out;
  PercentFormatInto(fmt, args, &out);
  return out.TakeText();
}

Value PercentFormatValue(const Value& fmt, const Value& args) {
  TrackedText out;
  PercentFormatInto(fmt.as_string(), args, &out);
  if (fmt.taint() != nullptr) return WholeIf(out.TakeText(), true);
  return out.TakeValue();
}

std::string StrFormat(const std::string& fmt, const CallArgs& args) {
  TrackedText out;
  StrFormatInto(fmt, args, &out);
  return out.TakeText();
}

Value StrFormatValue(const Value& fmt, const CallArgs& args) {
  TrackedText out;
  StrFormatInto(fmt.as_string(), args, &out);
  if (fmt.taint() != nullptr) return WholeIf(out.TakeText(), true);
  return out.TakeValue();
}

std::string Strftime(const std::string& fmt, const std::tm& t) {
  if (fmt.empty()) return "";
  std::vector<char> buf(256 + fmt.size() * 8);
  for (int attempt = 0; attempt < 4; ++attempt) {
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &t);
    if (n > 0) return std::string(buf.data(), n);
    buf.resize(buf.size() * 4);
  }
  return "";
}

}  // namespace tessera::chat
