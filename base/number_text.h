// Numbers typed by people: command-line options of every `moesim` command and of moesim-engine
// (and the Python module's values given as text). One strict parse for all of them, so that
// "99999999999999999999" is refused instead of saturating, "nan" and "inf" are refused instead of
// reaching a fit, and "12abc", "0x10", " 5" or "" are not numbers. A leading '+' is allowed.
// Ranges (an option's documented domain) are checked by the caller, which knows them.
// Header-only, standard library only (shared by sim/, engine/ and apps/).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace moesim {

// `text` for a message: quoted, at most 40 characters.
inline std::string quote_number_text(std::string_view text) {
  return "'" + std::string(text.substr(0, 40)) + (text.size() > 40 ? "...'" : "'");
}

// The whole of `text` as a decimal int64. std::nullopt with `*reason` set ("not an integer: 'x'",
// "integer out of range (beyond +-9.2e18): 'x'") otherwise.
inline std::optional<int64_t> parse_integer_text(std::string_view text, std::string* reason) {
  std::string_view digits = text;
  if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-') digits.remove_prefix(1);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range && end == digits.data() + digits.size()) {
    *reason = "integer out of range (beyond +-9.2e18): " + quote_number_text(text);
    return std::nullopt;
  }
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    *reason = "not an integer: " + quote_number_text(text);
    return std::nullopt;
  }
  return value;
}

// The whole of `text` as a finite double (decimal, optional exponent). std::nullopt with
// `*reason` set ("not a number: 'x'", "not a finite number: 'nan'", "out of a double's range:
// '1e400'") otherwise.
inline std::optional<double> parse_number_text(std::string_view text, std::string* reason) {
  std::string_view digits = text;
  if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-') digits.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value,
                                         std::chars_format::general);
  const bool whole = end == digits.data() + digits.size();
  if (ec == std::errc::result_out_of_range && whole) {
    *reason = "out of a double's range: " + quote_number_text(text);
    return std::nullopt;
  }
  if (digits.empty() || ec != std::errc() || !whole) {
    *reason = "not a number: " + quote_number_text(text);
    return std::nullopt;
  }
  if (!std::isfinite(value)) {
    *reason = "not a finite number: " + quote_number_text(text);
    return std::nullopt;
  }
  return value;
}

}  // namespace moesim
