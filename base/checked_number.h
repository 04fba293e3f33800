// Checked conversions for numbers read from inputs (JSON, JSONL, CSV; issue 19): every reader
// turns a parsed number into the type of its field through these, so that a value outside the
// type (an unsigned JSON integer above INT64_MAX, 1e30 for an int64 field, a timestamp whose
// nanoseconds overflow) is refused as bad input instead of wrapping, saturating or being
// undefined behaviour. Each returns std::nullopt when the value does not fit; the reader turns
// that into its ConfigError (file, line, key, reason). Header-only, shared by sim/ and engine/.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

namespace moesim {

// `v` as integer type To when To can hold it exactly.
template <typename To, typename From>
std::optional<To> checked_narrow(From v) {
  static_assert(std::is_integral_v<To> && std::is_integral_v<From>);
  if (!std::in_range<To>(v)) return std::nullopt;
  return static_cast<To>(v);
}

// `v` as int64 when it is finite, integral-valued or not (it is rounded half away from zero),
// and the rounded value lies in int64's range.
inline std::optional<int64_t> checked_llround(double v) {
  // 2^63 is exactly representable; every double below it rounds to an int64.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (!std::isfinite(v) || !(v > -kTwo63 && v < kTwo63)) return std::nullopt;
  const double r = std::round(v);
  if (!(r > -kTwo63 && r < kTwo63)) return std::nullopt;
  return static_cast<int64_t>(r);
}

// a * b, a + b, a - b in int64; std::nullopt on overflow.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace moesim
