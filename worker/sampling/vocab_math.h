// The arithmetic the sampler runs over a whole vocabulary, written so that the loops
// vectorize (a 150k-entry vocabulary is walked several times per token) and so that every
// platform computes the same floats: the exponential is our own rather than libm's (whose
// expf may differ in the last bit, and a draw landing on a boundary would then pick
// another token), and sums run in a fixed order. Compiled with -ffp-contract=off (see
// CMakeLists.txt) so that no compiler fuses multiplies and adds differently.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace tessera::sampling {

// exp(x) within 2 ulp for x in [-87, 88]; 0 below -87 (exp(-87) ~ 1.6e-38, far below
// anything a probability sum notices); NaN stays NaN. exp(0) is exactly 1.
// Range reduction x = n ln2 + r with ln2 split in two (Cody-Waite) and Cephes' expf
// minimax polynomial for e^r on [-ln2/2, ln2/2].
inline float FastExp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  // Adding 1.5 * 2^23 rounds a float of magnitude < 2^22 to the nearest integer.
  constexpr float kRound = 12582912.0f;
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
  const float t = xc * kLog2e + kRound;
  const float n = t - kRound;
  const int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<int32_t>((ni + 127) * (1 << 23)));
  return x < -87.0f ? 0.0f : y * scale;
}

// out[i] = FastExp((in[i] - shift) * scale) for i < n. (vocab_math.cc: built for AVX2
// too, chosen at load time; every lane width computes the same floats.)
void ExpShifted(const float* in, size_t n, float shift, float scale, float* out);

// The sum in double of FastExp(in[i] - shift) for i < n, in a fixed order (blocks of 256,
// each summed as SumInOrder does), without storing the exponentials.
double SumExpShifted(const float* in, size_t n, float shift);

// Sum of v[0..n) in double, in a fixed order (four interleaved partial sums) so that the
// result is the same everywhere and the loop is not one long dependency chain.
inline double SumInOrder(const float* v, size_t n) {
  double s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s[0] += v[i];
    s[1] += v[i + 1];
    s[2] += v[i + 2];
    s[3] += v[i + 3];
  }
  for (; i < n; ++i) s[0] += v[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// Largest of v[0..n), -inf when n == 0. Eight independent lanes so that it vectorizes;
// the result is exact, so the lane order does not matter.
inline float MaxOf(const float* v, size_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float lanes[8] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) lanes[j] = lanes[j] < v[i + j] ? v[i + j] : lanes[j];
  }
  float max = kNegInf;
  for (; i < n; ++i) max = max < v[i] ? v[i] : max;
  for (float l : lanes) max = max < l ? l : max;
  return max;
}

// MaxOf for a fixed count that is a multiple of 8 (a block of a longer scan).
template <size_t N>
inline float MaxOfBlock(const float* v) {
  static_assert(N % 8 == 0);
  float lanes[8];
  for (size_t j = 0; j < 8; ++j) lanes[j] = v[j];
  for (size_t i = 8; i < N; i += 8) {
    for (size_t j = 0; j < 8; ++j) lanes[j] = lanes[j] < v[i + j] ? v[i + j] : lanes[j];
  }
  float max = lanes[0];
  for (size_t j = 1; j < 8; ++j) max = max < lanes[j] ? lanes[j] : max;
  return max;
}

// out[i] = in[i] with NaN as -inf (a NaN never wins and would break every ordering) and
// +inf as the largest float (so that logit - max stays a number).
inline void SanitizeInto(const float* in, size_t n, float* out) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kMax = std::numeric_limits<float>::max();
  for (size_t i = 0; i < n; ++i) {
    float x = in[i];
    x = x != x ? -kInf : x;
    out[i] = x == kInf ? kMax : x;
  }
}

}  // namespace tessera::sampling
