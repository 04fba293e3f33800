#include "sim/calibration/op_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace moesim::sim {
namespace {

TEST(OpFit, RecoversLinearCoefficients) {
  std::vector<FitSample> s;
  for (int i = 1; i <= 40; ++i) {
    double flops = 1e6 * i, bytes = 3e4 * ((i * 7) % 11 + 1);
    s.push_back({flops, bytes, static_cast<double>(i), 2e-6 + 1e-12 * flops + 1e-10 * bytes});
  }
  OpFit f = fit_op(s, {FitFeature::kFlops, FitFeature::kBytes});
  ASSERT_EQ(f.segments.size(), 1u);
  EXPECT_NEAR(f.segments[0].intercept_s, 2e-6, 1e-9);
  EXPECT_NEAR(f.segments[0].s_per_flop, 1e-12, 1e-15);
  EXPECT_NEAR(f.segments[0].s_per_byte, 1e-10, 1e-13);
  EXPECT_NEAR(f.quality.r2, 1.0, 1e-9);
  EXPECT_LT(f.quality.mape, 1e-6);
}

TEST(OpFit, CoefficientsAreNonNegative) {
  // Time falls with bytes here; a plain least-squares fit would give a negative byte cost.
  std::vector<FitSample> s;
  for (int i = 1; i <= 30; ++i) {
    s.push_back({1e6 * i, 1e5 * (31 - i), static_cast<double>(i), 1e-12 * 1e6 * i + 1e-6});
  }
  OpFit f = fit_op(s, {FitFeature::kFlops, FitFeature::kBytes});
  for (const FitSegment& g : f.segments) {
    EXPECT_GE(g.intercept_s, 0);
    EXPECT_GE(g.s_per_flop, 0);
    EXPECT_GE(g.s_per_byte, 0);
  }
}

TEST(OpFit, FindsALatencyFloorRegime) {
  // A 24 us floor up to 24 tokens, then 1 us per token (1e5 FLOPs per token): two regimes.
  std::vector<FitSample> s;
  for (int t = 1; t <= 128; ++t) {
    double flops = 1e5 * t;
    s.push_back({flops, 0, static_cast<double>(t), std::max(24e-6, 1e-11 * flops)});
  }
  OpFit f = fit_op(s, {FitFeature::kFlops});
  ASSERT_GE(f.segments.size(), 2u);
  EXPECT_LT(f.quality.mape, 0.02);
  EXPECT_NEAR(f.predict_s(1e5 * 8, 0, 8), 24e-6, 1e-6);
  EXPECT_NEAR(f.predict_s(1e5 * 100, 0, 100), 100e-6, 2e-6);
}

TEST(OpFit, RangeChecks) {
  std::vector<FitSample> s;
  for (int i = 1; i <= 20; ++i) s.push_back({1e6 * i, 1e3 * i, 1.0 * i, 1e-6 * i});
  OpFit f = fit_op(s, {FitFeature::kFlops, FitFeature::kBytes});
  EXPECT_TRUE(f.in_range(5e6, 5e3, 5));
  EXPECT_FALSE(f.in_range(30e6, 5e3, 5));
  EXPECT_FALSE(f.in_range(5e6, 0.5e3, 5));
}

TEST(OpFit, RejectsNonPositiveTimes) {
  std::vector<FitSample> s = {{1, 1, 1, 1e-6}, {2, 2, 2, 0}};
  EXPECT_THROW(fit_op(s, {FitFeature::kFlops}), std::invalid_argument);
}

}  // namespace
}  // namespace moesim::sim
