// The registry: names to policies, unknown names and keys as ConfigErrors with file, line and
// key path, one policy per [policies.*] table in the scenario's order; settings resolved once
// per scenario load (the expert_pruning plan file read then, never by make_policies).
#include "sim/policy/policy_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/policy/expert_pruning.h"
#include "sim/policy/pruning_plan.h"
#include "sim/routing/routing_spec.h"
#include "tests/sim/policy/policy_test_util.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim {
namespace {

using testing::tiny_scenario;

TEST(PolicyRegistryTest, RegistersTheRequestPolicies) {
  const std::vector<std::string> names = builtin_policy_registry().names();
  for (const char* n :
       {"concurrency_cap", "long_context_cap", "queue_isolation", "session_coupling"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(PolicyRegistryTest, RegistersTheExpertPolicies) {
  const std::vector<std::string> names = builtin_policy_registry().names();
  for (const char* n : {"eplb", "expert_pruning", "hot_expert_replication"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(PolicyRegistryTest, NoPoliciesGivesAnEmptyList) {
  EXPECT_TRUE(make_policies(tiny_scenario("")).empty());
}

TEST(PolicyRegistryTest, BuildsOnePolicyPerTableInScenarioOrder) {
  Scenario sc = tiny_scenario(R"(
[policies.session_coupling]
[policies.concurrency_cap]
max_seqs_per_replica = 8
)");
  auto policies = make_policies(sc);
  ASSERT_EQ(policies.size(), 2u);
  ASSERT_EQ(sc.policies.size(), 2u);
  for (size_t i = 0; i < policies.size(); ++i) EXPECT_EQ(policies[i]->name(), sc.policies[i].name);
  // Building again gives fresh objects from the same unmodified scenario.
  EXPECT_EQ(make_policies(sc).size(), 2u);
}

TEST(PolicyRegistryTest, UnknownPolicyNameListsTheValidOnes) {
  Scenario sc = tiny_scenario("\n[policies.concurency_cap]\nmax_seqs_per_replica = 8\n");
  try {
    make_policies(sc);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "policy_test.toml");
    EXPECT_GT(e.line(), 0);
    EXPECT_EQ(e.key_path(), "policies.concurency_cap");
    EXPECT_NE(e.reason().find("unknown policy 'concurency_cap'"), std::string::npos) << e.what();
    for (const std::string& n : builtin_policy_registry().names()) {
      EXPECT_NE(e.reason().find(n), std::string::npos) << n;
    }
  }
}

TEST(PolicyRegistryTest, UnknownKeyInAPolicyTableIsAnError) {
  Scenario sc = tiny_scenario(
      "\n[policies.concurrency_cap]\nmax_seqs_per_replica = 8\nmax_step_token = 64\n");
  try {
    make_policies(sc);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "policies.concurrency_cap.max_step_token");
    EXPECT_NE(e.reason().find("unknown key"), std::string::npos) << e.what();
    EXPECT_NE(e.reason().find("max_step_tokens_per_replica"), std::string::npos) << e.what();
  }
}

TEST(PolicyRegistryTest, BadValueNamesItsKey) {
  Scenario sc = tiny_scenario("\n[policies.concurrency_cap]\nmax_seqs_per_replica = -1\n");
  try {
    make_policies(sc);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "policies.concurrency_cap.max_seqs_per_replica");
  }
}

TEST(PolicyRegistryTest, ResolvedSettingsReadThePlanFileOnce) {
  const std::string path = scratch::path("policy_registry_plan_once.json");
  Scenario sc = tiny_scenario(
      "\n[policies.concurrency_cap]\nmax_seqs_per_replica = 8\n"
      "[policies.expert_pruning]\nplan_file = \"" +
      path + "\"\n");
  const RoutingShape shape = routing_shape_of(*sc.model);
  {
    std::ofstream f(path);
    const PruningPlan plan = PruningPlan::from_layers(
        shape.num_experts, std::vector<std::vector<int32_t>>(shape.num_moe_layers, {0, 3}));
    f << format_pruning_plan_json(plan, sc.model->name, 0.125);
  }
  resolve_policy_settings(sc);
  ASSERT_EQ(sc.policies.size(), 2u);
  EXPECT_NE(sc.policies[0].settings, nullptr);
  const auto* pruning = dynamic_cast<const ExpertPruningSettings*>(sc.policies[1].settings.get());
  ASSERT_NE(pruning, nullptr);
  ASSERT_NE(pruning->plan, nullptr);
  EXPECT_EQ(pruning->plan->pruned(0), (std::vector<int32_t>{0, 3}));
  ASSERT_TRUE(std::filesystem::remove(path));
  for (int i = 0; i < 2; ++i) {
    const auto policies = make_policies(sc);
    ASSERT_EQ(policies.size(), 2u) << i;
    EXPECT_EQ(policies[0]->name(), "concurrency_cap");
    EXPECT_EQ(policies[1]->name(), "expert_pruning");
  }
  // Unresolved, the same table reads the (now missing) file.
  Scenario unresolved = sc;
  for (PolicyConfig& config : unresolved.policies) config.settings = nullptr;
  try {
    make_policies(unresolved);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "policies.expert_pruning.plan_file");
    EXPECT_EQ(e.reason().rfind("cannot read", 0), 0u) << e.what();
  }
}

TEST(PolicyRegistryTest, ResolveReportsTableErrorsAtLoad) {
  for (const char* table : {"\n[policies.concurrency_cap]\nmax_seqs_per_replica = 8\n"
                            "max_step_token = 64\n",
                            "\n[policies.expert_pruning]\nfracton = 0.25\n"}) {
    Scenario sc = tiny_scenario(table);
    std::string made;
    try {
      make_policies(sc);
    } catch (const ConfigError& e) {
      made = e.what();
    }
    try {
      resolve_policy_settings(sc);
      FAIL() << "expected ConfigError: " << table;
    } catch (const ConfigError& e) {
      EXPECT_NE(e.reason().find("unknown key"), std::string::npos) << e.what();
      EXPECT_EQ(e.what(), made);  // the message make_policies gives
    }
  }
  Scenario unknown = tiny_scenario("\n[policies.concurency_cap]\n");
  EXPECT_THROW(resolve_policy_settings(unknown), ConfigError);
}

}  // namespace
}  // namespace moesim::sim
