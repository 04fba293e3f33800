#include "sim/policy/pruning_plan.h"

#include <gtest/gtest.h>

#include "tests/sim/policy/pruning_test_util.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;
using testing::profile_with;
using testing::small_shape;

TEST(PruningPlan, LeastActivated) {
  const ActivationProfile p = profile_with({50, 0, 30, 1, 0, 19});  // 100 tokens
  // 50% of 6: the three least activated; ties (1 and 4 at 0) by expert id.
  const PruningPlan half = PruningPlan::least_activated(p, 0.5, 1);
  EXPECT_EQ(half.num_kept_per_layer(), 3);
  EXPECT_EQ(half.pruned(0), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(half.kept(0), (std::vector<int32_t>{0, 2, 5}));
  EXPECT_TRUE(half.is_pruned(0, 3));
  EXPECT_FALSE(half.is_pruned(0, 5));
  // round(0.25 * 6) = 2.
  EXPECT_EQ(PruningPlan::num_pruned_for(0.25, 6), 2);
  EXPECT_EQ(PruningPlan::least_activated(p, 0.25, 1).pruned(0), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(PruningPlan::least_activated(p, 0.0, 1).num_pruned_per_layer(), 0);
}

TEST(PruningPlan, JsonRoundTripAndErrors) {
  const RoutingShape shape = small_shape(2);
  const PruningPlan plan = PruningPlan::from_layers(16, {{3, 1}, {0, 15}});
  EXPECT_EQ(plan.pruned(0), (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(plan.is_pruned(1, 15));
  const std::string text = format_pruning_plan_json(plan, "tiny", 0.125);
  const PruningPlan back = parse_pruning_plan_json(text, "plan.json", shape);
  ASSERT_EQ(back.num_moe_layers(), 2);
  EXPECT_EQ(back.pruned(0), plan.pruned(0));
  EXPECT_EQ(back.pruned(1), plan.pruned(1));
  EXPECT_EQ(back.num_kept_per_layer(), 14);
  auto error = [&](const std::string& t) {
    return config_error_of([&] { parse_pruning_plan_json(t, "plan.json", shape); });
  };
  EXPECT_NE(error("[1, 2]").find("JSON object"), std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 8, "pruned": [[1], [2]]})").find("num_experts"),
            std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[1]]})").find("pruned"), std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[1], [2, 3]]})").find("pruned[1]"),
            std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[1, 1], [2, 3]]})").find("distinct"),
            std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[16], [2]]})").find("pruned[0]"),
            std::string::npos);
  std::string fifteen = "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]";
  EXPECT_NE(
      error(R"({"num_experts": 16, "pruned": [)" + fifteen + "," + fifteen + "]}").find("top_k"),
      std::string::npos);
  // The message names the source.
  EXPECT_NE(error("[1, 2]").find("plan.json"), std::string::npos);
}

}  // namespace
}  // namespace moesim::sim
