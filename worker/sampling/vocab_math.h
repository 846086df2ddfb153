// The exponential the sampler uses, written out so that every platform computes the same
// float for the same input (a libm's expf may differ in the last bit, and a draw that
// lands on a boundary would then pick another token), and so that loops over a 150k-entry
// vocabulary vectorize. Compiled with -ffp-contract=off (see CMakeLists.txt) so that no
// compiler fuses the multiplies and adds differently.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

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

// out[i] = FastExp((in[i] - shift) / divisor) for i < n.
inline void ExpShifted(const float* in, size_t n, float shift, float divisor, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = FastExp((in[i] - shift) / divisor);
}

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

}  // namespace tessera::sampling
