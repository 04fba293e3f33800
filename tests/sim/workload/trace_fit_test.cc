#include "sim/workload/trace_fit.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

TEST(KsDistance, IsTheLargestGapBetweenTheEmpiricalCdfs) {
  EXPECT_DOUBLE_EQ(ks_distance({1, 2, 3}, {1, 2, 3}), 0.0);
  EXPECT_DOUBLE_EQ(ks_distance({1, 2}, {3, 4}), 1.0);
  // F_a(2) = 1, F_b(2) = 1/4.
  EXPECT_DOUBLE_EQ(ks_distance({1, 2}, {2, 3, 4, 5}), 0.75);
  // Ties: at 0 the CDFs are 1/2 and 0, at 1 both reach 1.
  EXPECT_DOUBLE_EQ(ks_distance({0, 1}, {1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(ks_distance({}, {1}), 0.0);
}

// Row 1 repeats row 0's private id; id 0 is in every row. A loop that kept every id would find
// the whole of each later lap cached; fresh private ids keep only the shared block and the
// reuse inside the lap.
TEST(TraceFit, LoopHitRatesWithAndWithoutFreshPrivateIds) {
  std::vector<TraceRecord> rows(3);
  rows[0] = {0, 1024, 10, {0, 1}, 1};
  rows[1] = {kNsPerS, 1536, 20, {0, 1, 2}, 2};
  rows[2] = {3 * kNsPerS, 512, 30, {0, 3}, 3};
  const TraceFitReport r = fit_trace(rows, select_trace_window(rows, 0, 6.0, std::nullopt), 1);
  const double laps = static_cast<double>(r.num_laps);
  EXPECT_EQ(r.num_laps, 100);  // 3 rows: the cap
  // Lap 0: hits 0 + 2 + 1 of 7 blocks; later laps: 1 + 2 + 1.
  ASSERT_TRUE(r.loop_block_hit_rate.has_value());
  EXPECT_DOUBLE_EQ(*r.loop_block_hit_rate, (3 + 4 * (laps - 1)) / (7 * laps));
  EXPECT_DOUBLE_EQ(*r.loop_all_ids_kept_block_hit_rate, (3 + 7 * (laps - 1)) / (7 * laps));
  EXPECT_DOUBLE_EQ(*r.trace.block_hit_rate, 3 / 7.0);
  EXPECT_EQ(r.trace.num_requests, 3);
  EXPECT_DOUBLE_EQ(r.trace.rate_per_s, 3 / 4.5);  // span 3 s + mean gap 1.5 s
  EXPECT_DOUBLE_EQ(r.trace.mean_output_tokens, 20.0);
  EXPECT_EQ(r.model_sample.num_requests, 300);
  // Sessions are drawn uniformly: the two-turn one gives two of every three requests' worth, so
  // each prompt length keeps a third of the mass.
  EXPECT_LT(r.ks_prompt, 0.15);
}

}  // namespace
}  // namespace moesim::sim
