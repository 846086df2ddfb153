#include "common/chat/taint.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "common/chat/py_string.h"

namespace tessera::chat {

void TrackedText::AddSpan(size_t begin, size_t end) {
  if (begin >= end) return;
  if (!spans_.empty() && spans_.back().second == begin) {
    spans_.back().second = end;  // touching spans merge, so the list stays canonical
  } else {
    spans_.emplace_back(begin, end);
  }
}

void TrackedText::AppendTainted(std::string_view s) {
  const size_t at = text_.size();
  text_.append(s);
  AddSpan(at, text_.size());
}

void TrackedText::AppendPart(const Value& s, size_t begin, size_t end) {
  const size_t at = text_.size();
  text_.append(s.as_string(), begin, end - begin);
  const TaintSpans* spans = s.taint();
  if (spans == nullptr) return;
  for (const auto& [b, e] : *spans) {
    if (e <= begin) continue;
    if (b >= end) break;
    AddSpan(at + std::max(b, begin) - begin, at + std::min(e, end) - begin);
  }
}

void TrackedText::Append(const TrackedText& other) {
  const size_t at = text_.size();
  text_.append(other.text_);
  for (const auto& [b, e] : other.spans_) AddSpan(at + b, at + e);
}

void TrackedText::AppendNonString(const Value& v) {
  if (v.is_list() || v.is_dict() || v.is_namespace()) {
    Append(ToStr(v), ContainsTaint(v));
  } else {
    text_.append(ToStr(v));
  }
}

Value TrackedText::TakeValue() {
  TaintPtr taint;
  if (!spans_.empty()) taint = std::make_shared<const TaintSpans>(std::move(spans_));
  spans_.clear();
  return Value(std::move(text_), std::move(taint));
}

Value Substring(const Value& s, size_t begin, size_t end) {
  if (s.taint() == nullptr) return Value(s.as_string().substr(begin, end - begin));
  if (begin == 0 && end == s.as_string().size()) return s;
  TrackedText out;
  out.AppendPart(s, begin, end);
  return out.TakeValue();
}

Value PieceOf(const Value& src, size_t begin, size_t end, std::string text) {
  if (src.taint() == nullptr) return Value(std::move(text));
  if (src.as_string().compare(begin, end - begin, text) == 0) return Substring(src, begin, end);
  return WholeIf(std::move(text), Overlaps(src, begin, end));
}

Value PickCodePoints(const Value& s, const std::u32string& cps,
                     const std::vector<int64_t>& indices) {
  if (s.taint() == nullptr) {
    std::string out;
    out.reserve(indices.size());
    for (int64_t i : indices) AppendUtf8(cps[i], &out);
    return Value(std::move(out));
  }
  const std::vector<size_t> at = CodePointOffsets(s.as_string());
  TrackedText out;
  std::string one;
  for (int64_t i : indices) {
    one.clear();
    AppendUtf8(cps[i], &one);
    out.Append(one, Overlaps(s, at[i], at[i + 1]));
  }
  return out.TakeValue();
}

Value ReplaceValue(const Value& s, const std::string& old_sub, const Value& new_sub,
                   int64_t count) {
  const std::string& text = s.as_string();
  if (s.taint() == nullptr && new_sub.taint() == nullptr) {
    return Value(PyReplace(text, old_sub, new_sub.as_string(), count));
  }
  TrackedText out;
  auto insert = [&](bool replaces_request_data) {
    if (replaces_request_data) {
      out.AppendTainted(new_sub.as_string());
    } else {
      out.Append(new_sub);
    }
  };
  int64_t done = 0;
  if (old_sub.empty()) {
    // As PyReplace: `new_sub` before every code point (re-encoded) and at the end.
    const std::u32string cps = DecodeUtf8(text);
    const std::vector<size_t> at = CodePointOffsets(text);
    std::string one;
    for (size_t i = 0; i < cps.size(); ++i) {
      const bool tainted = Overlaps(s, at[i], at[i + 1]);
      if (count < 0 || done < count) {
        insert(tainted);
        ++done;
      }
      one.clear();
      AppendUtf8(cps[i], &one);
      out.Append(one, tainted);
    }
    if (count < 0 || done < count) {
      insert(!cps.empty() && Overlaps(s, at[cps.size() - 1], text.size()));
    }
    return out.TakeValue();
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    const size_t f = text.find(old_sub, pos);
    if (f == std::string::npos) break;
    out.AppendPart(s, pos, f);
    insert(Overlaps(s, f, f + old_sub.size()));
    pos = f + old_sub.size();
    ++done;
  }
  out.AppendPart(s, pos, text.size());
  return out.TakeValue();
}

Value ConcatTainted(Value&& a, const Value& b) {
  TaintPtr a_taint = a.shared_taint();
  const size_t shift = a.as_string().size();
  std::string text = a.TakeString();
  text += b.as_string();
  // Appending untainted text leaves `a`'s spans where they are.
  if (b.taint() == nullptr) return Value(std::move(text), std::move(a_taint));
  TaintSpans spans = a_taint ? *a_taint : TaintSpans();
  spans.reserve(spans.size() + b.taint()->size());
  for (const auto& [begin, end] : *b.taint()) {
    if (!spans.empty() && spans.back().second == shift + begin) {
      spans.back().second = shift + end;  // a span that `a` ends with goes on in `b`
    } else {
      spans.emplace_back(shift + begin, shift + end);
    }
  }
  return Value(std::move(text), std::make_shared<const TaintSpans>(std::move(spans)));
}

Value WholeIf(std::string text, bool tainted) {
  if (!tainted || text.empty()) return Value(std::move(text));
  const size_t n = text.size();
  return Value(std::move(text), std::make_shared<const TaintSpans>(TaintSpans{{0, n}}));
}

bool Overlaps(const Value& s, size_t begin, size_t end) {
  const TaintSpans* spans = s.taint();
  if (spans == nullptr || begin >= end) return false;
  for (const auto& [b, e] : *spans) {
    if (b >= end) return false;
    if (e > begin) return true;
  }
  return false;
}

bool ContainsTaint(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return v.taint() != nullptr;
    case Value::Kind::kList:
      return std::any_of(v.list().begin(), v.list().end(), ContainsTaint);
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const ValueDict& d = v.is_dict() ? v.dict() : v.namespace_attrs();
      if (d.keys_tainted() && !d.empty()) return true;
      for (const auto& [k, item] : d.entries()) {
        if (ContainsTaint(item)) return true;
      }
      return false;
    }
    default:
      return false;
  }
}

Value StrValue(const Value& v) {
  if (v.is_string()) return v;
  return WholeIf(ToStr(v), ContainsTaint(v));
}

Value ReprValue(const Value& v) { return WholeIf(Repr(v), ContainsTaint(v)); }

}  // namespace tessera::chat
