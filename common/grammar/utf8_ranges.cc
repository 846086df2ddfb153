#include "common/grammar/utf8_ranges.h"

#include <algorithm>

namespace tessera::grammar {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

int EncodedLength(uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

// Splits [lo, hi] (same encoded length boundaries handled here) until every piece encodes
// as a product of byte ranges: the construction of Russ Cox's "utf8 range" compiler (RE2,
// re2/compile.cc's description), written from the description.
void Split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSequence>& out) {
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && boundary < hi) {
      Split(lo, boundary, out);
      Split(boundary + 1, hi, out);
      return;
    }
  }
  const int n = EncodedLength(lo);
  // Make the low i continuation bytes span their full range whenever the higher bytes
  // differ between lo and hi.
  for (int i = 1; i < n; ++i) {
    const uint32_t low_mask = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~low_mask) == (hi & ~low_mask)) continue;
    if ((lo & low_mask) != 0) {
      Split(lo, lo | low_mask, out);
      Split((lo | low_mask) + 1, hi, out);
      return;
    }
    if ((hi & low_mask) != low_mask) {
      Split(lo, (hi & ~low_mask) - 1, out);
      Split(hi & ~low_mask, hi, out);
      return;
    }
  }
  std::vector<uint8_t> a, b;
  AppendUtf8(lo, a);
  AppendUtf8(hi, b);
  ByteRangeSequence seq;
  for (size_t i = 0; i < a.size(); ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

void AppendUtf8(uint32_t cp, std::vector<uint8_t>& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<uint8_t>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<uint8_t>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<uint8_t>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<uint8_t>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<uint8_t>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<uint8_t>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<uint8_t>(0x80 | (cp & 0x3F)));
  }
}

std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges) {
  std::vector<CodePointRange> clipped;
  for (CodePointRange r : ranges) {
    r.hi = std::min(r.hi, kMaxCodePoint);
    if (r.lo > r.hi) continue;
    // Cut out the surrogates.
    if (r.lo < kSurrogateLo && r.hi >= kSurrogateLo) {
      clipped.push_back({r.lo, kSurrogateLo - 1});
      r.lo = kSurrogateLo;
    }
    if (r.lo >= kSurrogateLo && r.lo <= kSurrogateHi) r.lo = kSurrogateHi + 1;
    if (r.lo <= r.hi) clipped.push_back(r);
  }
  std::sort(clipped.begin(), clipped.end(),
            [](const CodePointRange& x, const CodePointRange& y) { return x.lo < y.lo; });
  std::vector<CodePointRange> merged;
  for (const CodePointRange& r : clipped) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<CodePointRange> ComplementRanges(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return NormalizeRanges(std::move(out));
}

std::vector<ByteRangeSequence> Utf8Sequences(const std::vector<CodePointRange>& ranges) {
  std::vector<ByteRangeSequence> out;
  for (const CodePointRange& r : ranges) Split(r.lo, r.hi, out);
  return out;
}

}  // namespace tessera::grammar
