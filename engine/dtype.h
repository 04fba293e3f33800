// Element types of engine tensors and exact conversions between them.
//
// The engine's main path stores activations and weights in BF16 and accumulates in FP32; routed
// experts may be stored in FP8 E4M3 (with an FP32 scale per expert) where the device supports
// it. The CPU reference stores tensors in these formats too and emulates their rounding with
// the helpers below, so GPU kernels can be compared bit-for-bit on storage formats and with a
// dtype-scaled tolerance on computed results.
//
// The conversion helpers are plain inline functions usable from host code and, under nvcc, from
// device code (MOESIM_ENGINE_HD).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#if defined(__CUDACC__)
#define MOESIM_ENGINE_HD __host__ __device__
#else
#define MOESIM_ENGINE_HD
#endif

namespace moesim::engine {

// kF32: IEEE binary32. kBF16: bfloat16 (8-bit exponent, 7-bit mantissa). kFP8E4M3: OCP FP8
// E4M3FN (no infinities, max finite 448). kI32: int32 (indices only).
enum class DType { kF32, kBF16, kFP8E4M3, kI32 };

// Bytes per element: 4, 2, 1, 4.
int64_t dtype_size_bytes(DType dtype);
// "fp32", "bf16", "fp8", "i32" (the names used in step traces and measurements).
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for any other name.
std::optional<DType> dtype_from_name(std::string_view name);

// Largest finite FP8 E4M3 magnitude.
inline constexpr float kFp8E4M3Max = 448.0f;

MOESIM_ENGINE_HD inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

MOESIM_ENGINE_HD inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// FP32 -> BF16 bits, round to nearest, ties to even. NaN stays a (quiet) NaN.
MOESIM_ENGINE_HD inline uint16_t float_to_bf16(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

// BF16 bits -> FP32 (exact).
MOESIM_ENGINE_HD inline float bf16_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// FP8 E4M3FN bits -> FP32 (exact). 0x7f / 0xff are NaN.
MOESIM_ENGINE_HD inline float fp8e4m3_to_float(uint8_t b) {
  const uint32_t sign = (b & 0x80u) ? 0x80000000u : 0u;
  const uint32_t exponent = (b >> 3) & 0xfu;
  const uint32_t mantissa = b & 0x7u;
  if (exponent == 0xfu && mantissa == 0x7u) return bits_float(sign | 0x7fc00000u);
  if (exponent == 0) {
    // Subnormal: mantissa * 2^-9.
    const float magnitude = static_cast<float>(mantissa) * 0.001953125f;
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}

// FP32 -> FP8 E4M3FN bits, round to nearest, ties to even, saturating: finite values beyond
// +-448 (and infinities) become +-448 (the "satfinite" conversion of CUDA's cvt). NaN -> 0x7f.
MOESIM_ENGINE_HD inline uint8_t float_to_fp8e4m3(float x) {
  const uint32_t u = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs_bits = u & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return 0x7f;
  const float a = bits_float(abs_bits);
  if (a >= kFp8E4M3Max) return static_cast<uint8_t>(sign | 0x7e);
  if (a < 0.015625f) {
    // Subnormal range (below 2^-6): quantum 2^-9; nearbyint-style ties to even.
    const float scaled = a * 512.0f;
    uint32_t q = static_cast<uint32_t>(scaled);
    const float rest = scaled - static_cast<float>(q);
    if (rest > 0.5f || (rest == 0.5f && (q & 1u))) ++q;
    return static_cast<uint8_t>(sign | q);  // q == 8 is the smallest normal: encoding 0x08
  }
  // Normal: keep 3 mantissa bits of the FP32 value with round to nearest even.
  const uint32_t exponent = (abs_bits >> 23) - 127u + 7u;  // 1..15
  const uint32_t mantissa = abs_bits & 0x7fffffu;
  uint32_t q = (exponent << 3) | (mantissa >> 20);
  const uint32_t rest = mantissa & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (q & 1u))) ++q;
  if (q > 0x7eu) q = 0x7eu;  // rounding up past 448 saturates
  return static_cast<uint8_t>(sign | q);
}

// Value rounded through a storage format: round_bf16(x) == bf16_to_float(float_to_bf16(x)).
MOESIM_ENGINE_HD inline float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }
MOESIM_ENGINE_HD inline float round_fp8e4m3(float x) {
  return fp8e4m3_to_float(float_to_fp8e4m3(x));
}

}  // namespace moesim::engine
