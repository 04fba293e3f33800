#include "sim/serving/layer_study.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

// The all-to-all grows with the batch faster than expert compute (weight reads dominate small
// decode batches), so a crossover emerges; skew moves it to smaller batches.
TEST(LayerStudy, CrossoverEmergesAndSkewMovesItEarlier) {
  Scenario sc =
      load_scenario(std::string(MOESIM_SOURCE_DIR) + "/scenarios/teaching-crossover.toml");
  auto rows = run_layer_study(sc, {4, 8, 16, 32, 64, 128}, 4096, 1);
  ASSERT_EQ(rows.size(), 12u);
  auto crossover = [&](bool skewed) {
    for (const auto& r : rows) {
      if (r.skewed == skewed && r.comm_us > r.expert_max_us) return r.seqs_per_gpu;
    }
    return int64_t{-1};
  };
  int64_t skewed = crossover(true), uniform = crossover(false);
  ASSERT_GT(skewed, 4);  // small batches: expert weight reads dominate
  ASSERT_GT(uniform, 4);
  EXPECT_LT(skewed, uniform);
  for (size_t i = 1; i < 6; ++i) {
    EXPECT_GT(rows[i].comm_us, rows[i - 1].comm_us);  // comm grows with the batch
  }
  // The straggler: skew makes cold GPUs wait at the barriers.
  EXPECT_GT(rows[5].wait_mean_us, 10 * rows[11].wait_mean_us);
}

}  // namespace
}  // namespace moesim::sim
