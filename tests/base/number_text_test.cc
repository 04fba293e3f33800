// The one parse of typed numbers: whole text only, int64 overflow and non-finite values refused.
#include "base/number_text.h"

#include <gtest/gtest.h>

#include <string>

namespace moesim {
namespace {

std::string int_reason(const std::string& text) {
  std::string reason;
  return parse_integer_text(text, &reason) ? "" : reason;
}
std::string number_reason(const std::string& text) {
  std::string reason;
  return parse_number_text(text, &reason) ? "" : reason;
}

TEST(NumberText, IntegersAreReadWholeAndWithinInt64) {
  std::string reason;
  EXPECT_EQ(parse_integer_text("42", &reason), 42);
  EXPECT_EQ(parse_integer_text("+42", &reason), 42);
  EXPECT_EQ(parse_integer_text("-7", &reason), -7);
  EXPECT_EQ(parse_integer_text("9223372036854775807", &reason), INT64_MAX);
  EXPECT_EQ(parse_integer_text("-9223372036854775808", &reason), INT64_MIN);
  EXPECT_EQ(int_reason("9223372036854775808"),
            "integer out of range (beyond +-9.2e18): '9223372036854775808'");
  EXPECT_EQ(int_reason("18446744073709551616"),
            "integer out of range (beyond +-9.2e18): '18446744073709551616'");
  for (const char* bad : {"", "+", "-", "1.5", "1e3", "0x10", " 5", "5 ", "12abc", "+-1", "nan"}) {
    EXPECT_EQ(int_reason(bad), "not an integer: '" + std::string(bad) + "'") << bad;
  }
}

TEST(NumberText, NumbersAreFiniteDecimals) {
  std::string reason;
  EXPECT_EQ(parse_number_text("0.5", &reason), 0.5);
  EXPECT_EQ(parse_number_text("+1e3", &reason), 1000.0);
  EXPECT_EQ(parse_number_text("-2", &reason), -2.0);
  EXPECT_EQ(parse_number_text(".25", &reason), 0.25);
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity"}) {
    EXPECT_EQ(number_reason(bad), "not a finite number: '" + std::string(bad) + "'") << bad;
  }
  EXPECT_EQ(number_reason("1e400"), "out of a double's range: '1e400'");
  EXPECT_EQ(number_reason("-1e400"), "out of a double's range: '-1e400'");
  for (const char* bad : {"", "0x10", "1e", "1,5", " 1", "abc", "1.5x"}) {
    EXPECT_EQ(number_reason(bad), "not a number: '" + std::string(bad) + "'") << bad;
  }
}

TEST(NumberText, LongTextIsCutInTheReason) {
  const std::string long_text(1000, '9');
  EXPECT_EQ(int_reason(long_text),
            "integer out of range (beyond +-9.2e18): '" + std::string(40, '9') + "...'");
}

}  // namespace
}  // namespace moesim
