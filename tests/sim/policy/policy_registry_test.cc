// The registry: names to policies, unknown names and keys as ConfigErrors with file, line and
// key path, one policy per [policies.*] table in the scenario's order.
#include "sim/policy/policy_registry.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sim/config/config_error.h"
#include "tests/sim/policy/policy_test_util.h"

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

}  // namespace
}  // namespace moesim::sim
