#include "sim/workload/arrival_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "sim/core/horizon.h"

namespace moesim::sim {
namespace {

struct GapStats {
  double mean_s;
  double cv;
};

GapStats gap_stats(const ArrivalSpec& spec, int n) {
  ArrivalProcess p(spec);
  RngStream rng(3, "arrivals");
  SimTime last = 0;
  double sum = 0.0;
  double sum2 = 0.0;
  for (int i = 0; i < n; ++i) {
    const SimTime t = *p.next_arrival_ns(rng);
    EXPECT_GE(t, last);
    const double gap = to_seconds(t - last);
    sum += gap;
    sum2 += gap * gap;
    last = t;
  }
  const double mean = sum / n;
  return GapStats{mean, std::sqrt(sum2 / n - mean * mean) / mean};
}

TEST(ArrivalProcess, PoissonHasRateAndUnitCv) {
  const GapStats s = gap_stats(ArrivalSpec{ArrivalSpec::Process::kPoisson, 50.0, 1.0}, 400000);
  EXPECT_NEAR(s.mean_s, 0.02, 5 * 0.02 / std::sqrt(400000.0));
  EXPECT_NEAR(s.cv, 1.0, 0.01);
}

TEST(ArrivalProcess, GammaKeepsRateAndSetsBurstiness) {
  for (double cv : {0.5, 3.0}) {
    SCOPED_TRACE(cv);
    const GapStats s = gap_stats(ArrivalSpec{ArrivalSpec::Process::kGamma, 10.0, cv}, 400000);
    EXPECT_NEAR(s.mean_s, 0.1, 5 * 0.1 * cv / std::sqrt(400000.0));
    EXPECT_NEAR(s.cv, cv, 0.03 * cv);
  }
}

TEST(ArrivalProcess, ParsesTable) {
  TomlDocument doc =
      TomlDocument::parse_string("process = 'gamma'\nrate_per_s = 4\ncv = 2.5\n", "a.toml");
  TomlTable t = doc.root();
  const ArrivalSpec s = parse_arrival(t);
  EXPECT_EQ(s.process, ArrivalSpec::Process::kGamma);
  EXPECT_EQ(s.rate_per_s, 4.0);
  EXPECT_EQ(s.cv, 2.5);

  TomlDocument bad = TomlDocument::parse_string("rate_per_s = 0\n", "a.toml");
  TomlTable b = bad.root();
  try {
    parse_arrival(b);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "a.toml:1:14: rate_per_s: value 0 is out of range [1e-09, 1000000000]");
  }
}

// At the smallest rate (1e-9 per second: mean gap 31.7 years) gaps of centuries are drawn; the
// running sum overflowed int64 nanoseconds (issue 19). The stream ends at the horizon instead.
TEST(ArrivalProcess, TheStreamEndsAtTheHorizon) {
  for (ArrivalSpec::Process process :
       {ArrivalSpec::Process::kPoisson, ArrivalSpec::Process::kGamma}) {
    ArrivalSpec spec;
    spec.process = process;
    spec.rate_per_s = 1e-9;
    spec.cv = 3.0;
    ArrivalProcess p(spec);
    RngStream rng(5, "arrivals");
    SimTime last = 0;
    int n = 0;
    for (std::optional<SimTime> t; (t = p.next_arrival_ns(rng)); ++n) {
      EXPECT_GE(*t, last);
      EXPECT_LE(*t, kHorizonNs);
      last = *t;
      ASSERT_LT(n, 1000);
    }
    EXPECT_FALSE(p.next_arrival_ns(rng).has_value());  // and stays ended
    EXPECT_FALSE(p.next_arrival_ns(rng).has_value());
  }
}

}  // namespace
}  // namespace moesim::sim
