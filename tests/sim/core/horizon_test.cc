// The checked conversion of a duration in seconds to SimTime (sim/core/horizon.h): what
// from_seconds gives within the horizon, a HorizonError (a ConfigError) outside it, and checked
// sums.
#include "sim/core/horizon.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace moesim::sim {
namespace {

std::string error_of(double seconds) {
  try {
    checked_duration_ns(seconds, "test: an op", "check the test");
  } catch (const HorizonError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Horizon, IsOneHundredJulianYears) {
  EXPECT_EQ(kHorizonS, 100 * 365.25 * 86400);
  EXPECT_EQ(kHorizonNs, 3'155'760'000'000'000'000);
  EXPECT_EQ(static_cast<double>(kHorizonNs), kHorizonS * 1e9);
  // Two times within the horizon add without overflow.
  EXPECT_LE(kHorizonNs, std::numeric_limits<SimTime>::max() - kHorizonNs);
}

TEST(Horizon, WithinTheHorizonItIsFromSeconds) {
  for (double s : {0.0, -0.0, 1e-9, 0.5e-9, 1.4999e-9, 0.0123456789, 1.0, 3600.5, 1e7, 1e9,
                   kHorizonS - 1.0, kHorizonS}) {
    EXPECT_EQ(checked_duration_ns(s, "x"), from_seconds(s)) << s;
  }
  EXPECT_EQ(checked_duration_ns(kHorizonS, "x"), kHorizonNs);
  EXPECT_TRUE(within_horizon_s(kHorizonS));
  EXPECT_FALSE(within_horizon_s(std::nextafter(kHorizonS, 1e300)));
}

TEST(Horizon, BeyondNegativeAndNanAreErrorsNamingWhatAndTheHint) {
  EXPECT_EQ(error_of(1.2e297),
            "test: an op takes 1.2e+297 s, beyond the 100-year horizon (3.156e+09 s): check the "
            "test");
  EXPECT_EQ(error_of(std::numeric_limits<double>::infinity()),
            "test: an op takes inf s, beyond the 100-year horizon (3.156e+09 s): check the test");
  EXPECT_EQ(error_of(std::nextafter(kHorizonS, 1e300)),
            "test: an op takes 3.156e+09 s, beyond the 100-year horizon (3.156e+09 s): check the "
            "test");
  // 1e10 s overflowed from_seconds' int64 to a negative duration before the check.
  EXPECT_EQ(error_of(1e10),
            "test: an op takes 1e+10 s, beyond the 100-year horizon (3.156e+09 s): check the test");
  EXPECT_EQ(error_of(-1e-3), "test: an op takes -0.001 s, a negative duration: check the test");
  EXPECT_EQ(error_of(std::nan("")), "test: an op is not a number: check the test");
}

TEST(Horizon, ErrorsAreConfigErrorsWithoutAFile) {
  try {
    checked_duration_ns(1e300, "test: an op");
    FAIL() << "expected HorizonError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "test: an op takes 1e+300 s, beyond the 100-year horizon (3.156e+09 s)");
    EXPECT_EQ(e.file(), "");
    EXPECT_EQ(e.key_path(), "");
    EXPECT_EQ(e.reason(), e.what());
  }
}

TEST(Horizon, SumsAreChecked) {
  EXPECT_EQ(add_within_horizon(3, 4, "x"), 7);
  EXPECT_EQ(add_within_horizon(kHorizonNs - 1, 1, "x"), kHorizonNs);
  try {
    add_within_horizon(kHorizonNs, kHorizonNs, "test: a delay");
    FAIL() << "expected HorizonError";
  } catch (const HorizonError& e) {
    EXPECT_STREQ(e.what(),
                 "test: a delay takes 6.312e+09 s, beyond the 100-year horizon (3.156e+09 s)");
  }
}

TEST(Horizon, FormatsNumbersWithFourDigits) {
  EXPECT_EQ(format_number(1.23456e297), "1.235e+297");
  EXPECT_EQ(format_number(0.03125), "0.03125");
  EXPECT_EQ(format_number(8e-9), "8e-09");
}

}  // namespace
}  // namespace moesim::sim
