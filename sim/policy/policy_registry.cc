#include "sim/policy/policy_registry.h"

#include "sim/core/check.h"
#include "sim/policy/concurrency_cap.h"
#include "sim/policy/eplb_policy.h"
#include "sim/policy/expert_pruning_policy.h"
#include "sim/policy/hot_expert_replication_policy.h"
#include "sim/policy/long_context_cap.h"
#include "sim/policy/queue_isolation.h"
#include "sim/policy/session_coupling.h"

namespace moesim::sim {
namespace {

// Request-level policies: admission, prompt rewriting, pools and per-replica caps.
void register_request_policies(PolicyRegistry& registry) {
  registry.add("concurrency_cap", &make_concurrency_cap_policy);
  registry.add("session_coupling", &make_session_coupling_policy);
  registry.add("long_context_cap", &make_long_context_cap_policy);
  registry.add("queue_isolation", &make_queue_isolation_policy);
}

// Expert-level policies (placement, replication, pruning): hot_expert_replication and
// expert_pruning register here, one registry.add() line each.
void register_expert_policies(PolicyRegistry& registry) {
  registry.add("hot_expert_replication", make_hot_expert_replication_policy);
  registry.add("eplb", make_eplb_policy);
  registry.add("expert_pruning", make_expert_pruning_policy);
}

}  // namespace

void PolicyRegistry::add(const std::string& name, PolicyFactory factory) {
  MOESIM_CHECK(factory != nullptr, "null policy factory");
  MOESIM_CHECK(factories_.emplace(name, factory).second, "policy registered twice");
}

std::unique_ptr<ServingPolicy> PolicyRegistry::make(const PolicyConfig& config,
                                                    const Scenario& scenario) const {
  auto it = factories_.find(config.name);
  if (it == factories_.end()) {
    std::string valid;
    for (const auto& [name, factory] : factories_) valid += (valid.empty() ? "" : ", ") + name;
    config.table.fail_table("unknown policy '" + config.name + "' (valid: " + valid + ")");
  }
  TomlTable table = config.table;  // a fresh view: the scenario stays unmodified
  std::unique_ptr<ServingPolicy> policy = it->second(table, scenario);
  table.finish();
  MOESIM_CHECK(policy != nullptr, "policy factory returned null");
  return policy;
}

std::vector<std::string> PolicyRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, factory] : factories_) out.push_back(name);
  return out;
}

PolicyRegistry builtin_policy_registry() {
  PolicyRegistry registry;
  register_request_policies(registry);
  register_expert_policies(registry);
  return registry;
}

std::vector<std::unique_ptr<ServingPolicy>> make_policies(const Scenario& scenario) {
  std::vector<std::unique_ptr<ServingPolicy>> out;
  if (scenario.policies.empty()) return out;
  const PolicyRegistry registry = builtin_policy_registry();
  for (const PolicyConfig& config : scenario.policies) {
    out.push_back(registry.make(config, scenario));
  }
  return out;
}

}  // namespace moesim::sim
