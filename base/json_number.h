// Integers of parsed JSON values, checked (base/checked_number.h; issue 19). nlohmann keeps
// integers above INT64_MAX as unsigned and get<int64_t>() wraps them (18446744073709551615 reads
// as -1); these return std::nullopt instead, so a reader can refuse the value with its own
// ConfigError. Header-only, nlohmann only (shared by sim/ and engine/).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/checked_number.h"

namespace moesim {

// The value of an integer JSON number (signed or unsigned) as To when To holds it; std::nullopt
// for a non-integer (float, string, ...) or a value outside To.
template <typename To = int64_t>
std::optional<To> json_integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return checked_narrow<To>(v.get<uint64_t>());
  if (v.is_number_integer()) return checked_narrow<To>(v.get<int64_t>());
  return std::nullopt;
}

// The reason to give when json_integer() refused `v`.
inline const char* json_integer_problem(const nlohmann::json& v) {
  return v.is_number_integer() ? "integer out of range" : "expected an integer";
}

// nlohmann refuses a number beyond double's range (1e400) while parsing with out_of_range 406,
// not parse_error, and without a position: readers catch it too. This is its reason without the
// "[json.exception.out_of_range.406] " prefix ("number overflow parsing '1e400'").
inline std::string json_exception_reason(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

}  // namespace moesim
