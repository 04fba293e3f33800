#include "sim/study/simulate.h"

#include <gtest/gtest.h>

namespace moesim::sim::study {
namespace {

const std::string kScenario = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

TEST(Simulate, RunsTheScenarioWithItsSeed) {
  Scenario sc = load_scenario(kScenario);
  EXPECT_EQ(num_gpus(sc), 2);
  RunOutput a = simulate(sc, 3);
  RunOutput b = run_scenario(sc, RunOptions{}, 3);
  EXPECT_TRUE(a.conservation_ok);
  EXPECT_GT(a.summary.num_completed, 0);
  EXPECT_EQ(a.digest_hex, b.digest_hex);  // no policies in this scenario
  EXPECT_NE(simulate(sc, 4).digest_hex, a.digest_hex);
}

}  // namespace
}  // namespace moesim::sim::study
