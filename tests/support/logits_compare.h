// Reading the conformance vectors and comparing logits as ../shared/conformance/README.md's
// tiers define it (max |Δ|, KL(p_ref || p_got) per row, top-1 agreement), shared by the
// conformance tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::testing {

inline nlohmann::json ReadJsonFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// A raw little-endian float32 file.
inline std::vector<float> ReadF32(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v(std::filesystem::file_size(p) / 4);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

// log-softmax in double.
inline std::vector<double> LogSoftmax(const float* x, int64_t n) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] - m - std::log(s);
  return out;
}

struct LogitsComparison {
  double max_abs = 0, max_kl = 0, mean_kl = 0, top1 = 0;
};

// Rows of `vocab` logits: `got` against the reference `ref`.
inline LogitsComparison CompareLogits(const std::vector<float>& got, const std::vector<float>& ref,
                                      int64_t vocab) {
  LogitsComparison c;
  const int64_t rows = static_cast<int64_t>(ref.size()) / vocab;
  int agree = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = &got[r * vocab];
    const float* b = &ref[r * vocab];
    std::vector<double> la = LogSoftmax(a, vocab), lb = LogSoftmax(b, vocab);
    double kl = 0;
    int64_t am = 0, bm = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      c.max_abs = std::max(c.max_abs, static_cast<double>(std::fabs(a[i] - b[i])));
      kl += std::exp(lb[i]) * (lb[i] - la[i]);
      if (a[i] > a[am]) am = i;
      if (b[i] > b[bm]) bm = i;
    }
    c.max_kl = std::max(c.max_kl, kl);
    c.mean_kl += kl / static_cast<double>(rows);
    agree += am == bm;
  }
  c.top1 = static_cast<double>(agree) / static_cast<double>(rows);
  return c;
}

}  // namespace tessera::testing
