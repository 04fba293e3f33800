#include "sim/policy/policy_registry.h"

#include <utility>

#include "base/check.h"
#include "sim/policy/concurrency_cap.h"
#include "sim/policy/eplb_policy.h"
#include "sim/policy/expert_pruning_policy.h"
#include "sim/policy/hot_expert_replication_policy.h"
#include "sim/policy/long_context_cap.h"
#include "sim/policy/queue_isolation.h"
#include "sim/policy/session_coupling.h"

namespace moesim::sim {
namespace {

// The settings of a single-step policy: its table, validated once by its factory.
struct TableSettings final : PolicySettings {
  TableSettings(std::shared_ptr<const TomlDocument> document, TomlTable table)
      : document(std::move(document)), table(std::move(table)) {}
  std::shared_ptr<const TomlDocument> document;  // keeps `table` valid
  TomlTable table;                               // a fresh view: no key asked yet
};

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
  registry.add("expert_pruning", parse_expert_pruning_policy_settings, make_expert_pruning_policy);
}

}  // namespace

void PolicyRegistry::add(const std::string& name, PolicyParser parse, PolicyMaker make) {
  MOESIM_CHECK(parse != nullptr && make != nullptr, "null policy parser or maker");
  MOESIM_CHECK(entries_.emplace(name, Entry{parse, make, nullptr}).second,
               "policy registered twice");
}

void PolicyRegistry::add(const std::string& name, PolicyFactory factory) {
  MOESIM_CHECK(factory != nullptr, "null policy factory");
  MOESIM_CHECK(entries_.emplace(name, Entry{nullptr, nullptr, factory}).second,
               "policy registered twice");
}

const PolicyRegistry::Entry& PolicyRegistry::entry(const PolicyConfig& config) const {
  auto it = entries_.find(config.name);
  if (it == entries_.end()) {
    std::string valid;
    for (const auto& [name, e] : entries_) valid += (valid.empty() ? "" : ", ") + name;
    config.table.fail_table("unknown policy '" + config.name + "' (valid: " + valid + ")");
  }
  return it->second;
}

std::shared_ptr<const PolicySettings> PolicyRegistry::resolve(const PolicyConfig& config,
                                                              const Scenario& scenario) const {
  const Entry& e = entry(config);
  TomlTable table = config.table;  // a fresh view: the scenario stays unmodified
  std::shared_ptr<const PolicySettings> settings;
  if (e.parse) {
    settings = e.parse(table, scenario);
  } else {
    const std::unique_ptr<ServingPolicy> built = e.factory(table, scenario);  // validates
    MOESIM_CHECK(built != nullptr, "policy factory returned null");
    settings = std::make_shared<const TableSettings>(config.document, config.table);
  }
  table.finish();
  MOESIM_CHECK(settings != nullptr, "policy parser returned null");
  return settings;
}

std::unique_ptr<ServingPolicy> PolicyRegistry::make(const PolicyConfig& config,
                                                    const Scenario& scenario) const {
  const Entry& e = entry(config);
  const std::shared_ptr<const PolicySettings> settings =
      config.settings ? config.settings : resolve(config, scenario);
  std::unique_ptr<ServingPolicy> policy;
  if (e.make) {
    policy = e.make(*settings, scenario);
  } else {
    const auto* resolved = dynamic_cast<const TableSettings*>(settings.get());
    MOESIM_CHECK(resolved != nullptr, "settings resolved by this registry");
    TomlTable table = resolved->table;  // validated at resolve: finish() cannot fail
    policy = e.factory(table, scenario);
  }
  MOESIM_CHECK(policy != nullptr, "policy maker returned null");
  return policy;
}

std::vector<std::string> PolicyRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

PolicyRegistry builtin_policy_registry() {
  PolicyRegistry registry;
  register_request_policies(registry);
  register_expert_policies(registry);
  return registry;
}

void resolve_policy_settings(Scenario& scenario) {
  if (scenario.policies.empty()) return;
  const PolicyRegistry registry = builtin_policy_registry();
  for (PolicyConfig& config : scenario.policies) {
    if (!config.settings) config.settings = registry.resolve(config, scenario);
  }
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
