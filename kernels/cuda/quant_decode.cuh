// Decoders of the GGUF block formats (spec section 15, common/quant/blocks.h) for the CUDA
// kernels: one element of one block at a time, so that GEMV lanes decode the weights in
// registers. Host-and-device code: plain C++ compilers see ordinary inline functions, which
// is how tests/unit/cuda_decode_host_test.cc checks every layout without a GPU.
//
// The arithmetic is common/quant/dequantize_ref.cc's operation for operation (same products
// in the same order), so a decoded value equals the CPU reference's bit for bit: products
// of an fp16 scale and small integers are exact in float32, and a fused multiply-add of an
// exact product rounds once, like the separate multiply and add.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/gguf/ggml_type.h"
#include "common/quant/blocks.h"
#include "common/util/half.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define TESSERA_HD __host__ __device__ __forceinline__
#else
#define TESSERA_HD inline
#endif

namespace tessera::cuda::device {

using gguf::GgmlType;

#ifdef __CUDACC__
__constant__ static const int8_t kIq4nlDevice[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                     1,    13,   25,  38,  53,  69,  89,  113};
#endif

// The IQ4_NL codebook value of nibble i (spec 15.1): constant memory on the device.
TESSERA_HD int Iq4nl(int i) {
#ifdef __CUDA_ARCH__
  return kIq4nlDevice[i];
#else
  return quant::kIq4nlValues[i];
#endif
}

// IEEE binary16 bits (as stored in GGUF blocks) to float, exactly.
TESSERA_HD float Fp16Bits(uint16_t bits) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(bits));
#else
  return Fp16ToFloat(bits);
#endif
}

// bfloat16 bits to float (the upper half of a binary32).
TESSERA_HD float Bf16Bits(uint16_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
#else
  return Bf16ToFloat(bits);
#endif
}

TESSERA_HD uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
TESSERA_HD uint32_t Load32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Plain types are naturally aligned (a row of f32 starts 4-byte aligned): one load on the
// device; byte loads (no aliasing questions) on the host.
TESSERA_HD uint16_t LoadAligned16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint16_t*>(p);
#else
  return Load16(p);
#endif
}
TESSERA_HD float LoadF32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const float*>(p);
#else
  const uint32_t u = Load32(p);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

template <GgmlType kType>
struct Decoder;

template <>
struct Decoder<GgmlType::kF32> {
  static constexpr int kElems = 1, kBytes = 4;
  static TESSERA_HD float Elem(const uint8_t* b, int) { return LoadF32(b); }
};
template <>
struct Decoder<GgmlType::kF16> {
  static constexpr int kElems = 1, kBytes = 2;
  static TESSERA_HD float Elem(const uint8_t* b, int) { return Fp16Bits(LoadAligned16(b)); }
};
template <>
struct Decoder<GgmlType::kBF16> {
  static constexpr int kElems = 1, kBytes = 2;
  static TESSERA_HD float Elem(const uint8_t* b, int) { return Bf16Bits(LoadAligned16(b)); }
};

// Nibble of element e (0..31) of a 16-byte qs: low nibbles are elements 0..15.
TESSERA_HD int Nibble(const uint8_t* qs, int e) {
  return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4);
}

template <>
struct Decoder<GgmlType::kQ4_0> {
  static constexpr int kElems = 32, kBytes = 18;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    return static_cast<float>(Nibble(b + 2, e) - 8) * Fp16Bits(Load16(b));
  }
};
template <>
struct Decoder<GgmlType::kQ4_1> {
  static constexpr int kElems = 32, kBytes = 20;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    return static_cast<float>(Nibble(b + 4, e)) * Fp16Bits(Load16(b)) + Fp16Bits(Load16(b + 2));
  }
};
template <>
struct Decoder<GgmlType::kQ5_0> {
  static constexpr int kElems = 32, kBytes = 22;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    // Element e's fifth bit is bit e of qh (bit j for j < 16, bit j + 16 for the high half).
    const int q = Nibble(b + 6, e) | (((Load32(b + 2) >> e) & 1) << 4);
    return static_cast<float>(q - 16) * Fp16Bits(Load16(b));
  }
};
template <>
struct Decoder<GgmlType::kQ5_1> {
  static constexpr int kElems = 32, kBytes = 24;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    const int q = Nibble(b + 8, e) | (((Load32(b + 4) >> e) & 1) << 4);
    return static_cast<float>(q) * Fp16Bits(Load16(b)) + Fp16Bits(Load16(b + 2));
  }
};
template <>
struct Decoder<GgmlType::kQ8_0> {
  static constexpr int kElems = 32, kBytes = 34;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    return static_cast<float>(static_cast<int8_t>(b[2 + e])) * Fp16Bits(Load16(b));
  }
};
template <>
struct Decoder<GgmlType::kIQ4_NL> {
  static constexpr int kElems = 32, kBytes = 18;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    return Fp16Bits(Load16(b)) * static_cast<float>(Iq4nl(Nibble(b + 2, e)));
  }
};

// Q2_K {scales 16, qs 64, d, dmin}: e = 128h + 32j + 16k + l.
template <>
struct Decoder<GgmlType::kQ2_K> {
  static constexpr int kElems = 256, kBytes = 84;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    const int h = e >> 7, j = (e >> 5) & 3, k = (e >> 4) & 1, l = e & 15;
    const int sc = b[8 * h + 2 * j + k];
    const int q = (b[16 + 32 * h + 16 * k + l] >> (2 * j)) & 3;
    const float dl = Fp16Bits(Load16(b + 80)) * static_cast<float>(sc & 0xF);
    const float ml = Fp16Bits(Load16(b + 82)) * static_cast<float>(sc >> 4);
    return dl * static_cast<float>(q) - ml;
  }
};

// Q3_K {hmask 32, qs 64, scales 12, d}: e = 128h + 32j + 16k + l, scale 8h + 2j + k.
template <>
struct Decoder<GgmlType::kQ3_K> {
  static constexpr int kElems = 256, kBytes = 110;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    const int h = e >> 7, j = (e >> 5) & 3, k = (e >> 4) & 1, l = e & 15;
    const int i = 8 * h + 2 * j + k;
    const uint8_t* s12 = b + 96;
    const int low = i < 8 ? (s12[i] & 0xF) : (s12[i - 8] >> 4);
    const int high = (s12[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
    const int scale = (low | (high << 4)) - 32;
    const int q2 = (b[32 + 32 * h + 16 * k + l] >> (2 * j)) & 3;
    const int q = q2 - (((b[16 * k + l] >> (4 * h + j)) & 1) ? 0 : 4);
    return Fp16Bits(Load16(b + 108)) * static_cast<float>(scale) * static_cast<float>(q);
  }
};

// The 6-bit (scale, min) pair of sub-block s of Q4_K / Q5_K (spec 15.2).
TESSERA_HD void ScaleMinK4(const uint8_t* q, int s, int* sc, int* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    *m = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

// Q4_K {d, dmin, scales 12, qs 128}: e = 64p + 32k + l, sub-block 2p + k.
template <>
struct Decoder<GgmlType::kQ4_K> {
  static constexpr int kElems = 256, kBytes = 144;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    const int p = e >> 6, k = (e >> 5) & 1, l = e & 31;
    int sc, m;
    ScaleMinK4(b + 4, 2 * p + k, &sc, &m);
    const uint8_t byte = b[16 + 32 * p + l];
    const int q = k ? (byte >> 4) : (byte & 0xF);
    const float d1 = Fp16Bits(Load16(b)) * static_cast<float>(sc);
    const float m1 = Fp16Bits(Load16(b + 2)) * static_cast<float>(m);
    return d1 * static_cast<float>(q) - m1;
  }
};

// Q5_K {d, dmin, scales 12, qh 32, qs 128}: Q4_K plus bit 2p + k of qh[l].
template <>
struct Decoder<GgmlType::kQ5_K> {
  static constexpr int kElems = 256, kBytes = 176;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    const int p = e >> 6, k = (e >> 5) & 1, l = e & 31;
    int sc, m;
    ScaleMinK4(b + 4, 2 * p + k, &sc, &m);
    const uint8_t byte = b[48 + 32 * p + l];
    const int q = (k ? (byte >> 4) : (byte & 0xF)) + (((b[16 + l] >> (2 * p + k)) & 1) ? 16 : 0);
    const float d1 = Fp16Bits(Load16(b)) * static_cast<float>(sc);
    const float m1 = Fp16Bits(Load16(b + 2)) * static_cast<float>(m);
    return d1 * static_cast<float>(q) - m1;
  }
};

// Q6_K {ql 128, qh 64, scales 16 × int8, d}: e = 128h + 32c + l (c: which quarter).
template <>
struct Decoder<GgmlType::kQ6_K> {
  static constexpr int kElems = 256, kBytes = 210;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    const int h = e >> 7, c = (e >> 5) & 3, l = e & 31;
    const uint8_t ql = b[64 * h + l + ((c & 1) ? 32 : 0)];
    const uint8_t qh = b[128 + 32 * h + l];
    const int low = (c & 2) ? (ql >> 4) : (ql & 0xF);
    const int q = (low | (((qh >> (2 * c)) & 3) << 4)) - 32;
    const int8_t sc = static_cast<int8_t>(b[192 + 8 * h + l / 16 + 2 * c]);
    return Fp16Bits(Load16(b + 208)) * static_cast<float>(sc) * static_cast<float>(q);
  }
};

// IQ4_XS {d, scales_h 16 bits, scales_l 4, qs 128}: 8 sub-blocks of 32 through kIq4nl.
template <>
struct Decoder<GgmlType::kIQ4_XS> {
  static constexpr int kElems = 256, kBytes = 136;
  static TESSERA_HD float Elem(const uint8_t* b, int e) {
    const int ib = e >> 5, j = e & 31;
    const int ls =
        ((b[4 + ib / 2] >> (4 * (ib & 1))) & 0xF) | (((Load16(b + 2) >> (2 * ib)) & 3) << 4);
    const float dl = Fp16Bits(Load16(b)) * static_cast<float>(ls - 32);
    return dl * static_cast<float>(Iq4nl(Nibble(b + 8 + 16 * ib, j)));
  }
};

// Element k of a row of blocks.
template <GgmlType kType>
TESSERA_HD float RowElem(const uint8_t* row, int64_t k) {
  using D = Decoder<kType>;
  return D::Elem(row + (k / D::kElems) * D::kBytes, static_cast<int>(k % D::kElems));
}

}  // namespace tessera::cuda::device

// Runs the statements with `kT` bound (as a constexpr GgmlType) to each supported `type`;
// `otherwise` runs for the rest.
#define TESSERA_QUANT_CASE(kT, name, ...)                                     \
  case ::tessera::gguf::GgmlType::name: {                                     \
    constexpr ::tessera::gguf::GgmlType kT = ::tessera::gguf::GgmlType::name; \
    __VA_ARGS__;                                                              \
    break;                                                                    \
  }
#define TESSERA_DISPATCH_QUANT(type, kT, otherwise, ...) \
  switch (type) {                                        \
    TESSERA_QUANT_CASE(kT, kF32, __VA_ARGS__)            \
    TESSERA_QUANT_CASE(kT, kF16, __VA_ARGS__)            \
    TESSERA_QUANT_CASE(kT, kBF16, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ4_0, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ4_1, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ5_0, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ5_1, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ8_0, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ2_K, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ3_K, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ4_K, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ5_K, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kQ6_K, __VA_ARGS__)           \
    TESSERA_QUANT_CASE(kT, kIQ4_NL, __VA_ARGS__)         \
    TESSERA_QUANT_CASE(kT, kIQ4_XS, __VA_ARGS__)         \
    default:                                             \
      otherwise;                                         \
  }
