#include "sim/policy/expert_pruning.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/config/toml_source.h"
#include "tests/sim/policy/policy_test_util.h"
#include "tests/sim/policy/pruning_test_util.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;
using testing::tiny_scenario;

TEST(ExpertPruningConfig, DefaultsAndErrors) {
  auto parse = [](const std::string& text) {
    TomlDocument doc = TomlDocument::parse_string(text, "p.toml");
    TomlTable t = doc.root();
    return parse_expert_pruning_config(t);
  };
  const ExpertPruningConfig d = parse("");
  EXPECT_DOUBLE_EQ(d.fraction, 0.2);
  EXPECT_DOUBLE_EQ(d.dead_threshold, 1e-3);
  EXPECT_EQ(d.profile_steps, 8);
  EXPECT_EQ(d.tokens_per_step, 4096);
  EXPECT_DOUBLE_EQ(parse("fraction = 0.5\n").fraction, 0.5);
  EXPECT_NE(config_error_of([&] { parse("fraction = 1.0\n"); }).find("[0, 1)"), std::string::npos);
  EXPECT_NE(config_error_of([&] { parse("profile_steps = 0\n"); }).find("profile_steps"),
            std::string::npos);
  EXPECT_NE(config_error_of([&] { parse("fractions = 0.5\n"); }).find("unknown key"),
            std::string::npos);
}

// The table of a tiny scenario's [policies.expert_pruning], resolved.
ExpertPruningSettings settings_of(const std::string& table) {
  const Scenario sc = tiny_scenario("\n[policies.expert_pruning]\n" + table);
  for (const PolicyConfig& config : sc.policies) {
    if (config.name != "expert_pruning") continue;
    TomlTable t = config.table;
    return parse_expert_pruning_settings(t, sc);
  }
  ADD_FAILURE() << "no [policies.expert_pruning]";
  return {};
}

// The plan file is read and checked when the table is resolved; the settings carry the plan.
TEST(ExpertPruningSettings, ReadsThePlanFileOnce) {
  const ExpertPruningSettings by_fraction = settings_of("fraction = 0.25\n");
  EXPECT_EQ(by_fraction.plan, nullptr);
  EXPECT_DOUBLE_EQ(by_fraction.config.fraction, 0.25);

  const std::string path = scratch::path("expert_pruning_settings_plan.json");
  {
    std::ofstream f(path);
    f << format_pruning_plan_json(
        PruningPlan::from_layers(16, {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}), "tiny", 0.25);
  }
  const ExpertPruningSettings by_file = settings_of("plan_file = \"" + path + "\"\n");
  ASSERT_NE(by_file.plan, nullptr);
  EXPECT_EQ(by_file.plan->num_moe_layers(), 3);
  EXPECT_EQ(by_file.plan->pruned(2), (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(by_file.config.plan_file, path);

  // Errors name the key and the file.
  const std::string missing =
      config_error_of([&] { settings_of("plan_file = \"/nonexistent/plan.json\"\n"); });
  EXPECT_NE(missing.find("policies.expert_pruning.plan_file: cannot read /nonexistent/plan.json"),
            std::string::npos)
      << missing;
  {
    std::ofstream f(path);
    f << R"({"num_experts": 16, "pruned": [[1], [2]]})";
  }
  const std::string wrong_shape =
      config_error_of([&] { settings_of("plan_file = \"" + path + "\"\n"); });
  EXPECT_NE(wrong_shape.find("policies.expert_pruning.plan_file: " + path + ": pruned: "),
            std::string::npos)
      << wrong_shape;
  std::filesystem::remove(path);
}

TEST(ExpertPruningSettings, ScenarioCrossChecks) {
  const std::string both = config_error_of([&] { settings_of("\n[policies.eplb]\n"); });
  EXPECT_NE(both.find("cannot be combined with [policies.eplb]"), std::string::npos) << both;
  const std::string too_many = config_error_of([&] { settings_of("fraction = 0.95\n"); });
  EXPECT_NE(too_many.find("policies.expert_pruning.fraction: prunes 15 of the 16"),
            std::string::npos)
      << too_many;
}

}  // namespace
}  // namespace moesim::sim
