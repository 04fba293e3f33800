// JSON integers: signed and unsigned values that fit the target type are read exactly; values
// above INT64_MAX are refused instead of wrapping; non-integers are refused with their reason.
#include "base/json_number.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace moesim {
namespace {

using nlohmann::json;

TEST(JsonNumber, ReadsIntegersThatFit) {
  EXPECT_EQ(json_integer(json::parse("-7")), -7);
  EXPECT_EQ(json_integer(json::parse("9223372036854775807")), INT64_MAX);
  EXPECT_EQ(json_integer<int32_t>(json::parse("2147483647")), INT32_MAX);
}

TEST(JsonNumber, RefusesValuesOutsideTheTypeWithoutWrapping) {
  const json huge = json::parse("18446744073709551615");
  EXPECT_EQ(huge.get<int64_t>(), -1);  // what the check prevents
  EXPECT_EQ(json_integer(huge), std::nullopt);
  EXPECT_STREQ(json_integer_problem(huge), "integer out of range");
  EXPECT_EQ(json_integer<int32_t>(json::parse("2147483648")), std::nullopt);
  EXPECT_EQ(json_integer<uint32_t>(json::parse("-1")), std::nullopt);
}

TEST(JsonNumber, RefusesNonIntegers) {
  for (const char* text : {"1.0", "\"3\"", "true", "null", "[1]"}) {
    const json v = json::parse(text);
    EXPECT_EQ(json_integer(v), std::nullopt) << text;
    EXPECT_STREQ(json_integer_problem(v), "expected an integer") << text;
  }
}

TEST(JsonNumber, ExceptionReasonDropsNlohmannsPrefix) {
  try {
    const json v = json::parse("1e400");
    ADD_FAILURE() << "no exception: " << v.dump();
  } catch (const json::exception& e) {
    EXPECT_EQ(json_exception_reason(e), "number overflow parsing '1e400'");
  }
}

}  // namespace
}  // namespace moesim
