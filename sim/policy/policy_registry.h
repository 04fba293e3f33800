// Policies by name: each [policies.<name>] table of a scenario becomes one ServingPolicy object
// per run. A PolicyRegistry maps names to factories; builtin_policy_registry() registers every
// shipped policy (one line each, in policy_registry.cc) and make_policies() builds a scenario's
// policies, in file order, for run_scenario().
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim {

// Builds a policy from its table. Reads every key it knows (raising ConfigError through `table`
// for bad values, so messages name file, line and key path); the registry calls
// table.finish() afterwards, so keys the factory did not read are "unknown key" errors. The
// scenario is for cross-checks (pool names, workload settings); the returned policy must not
// keep references into it beyond the run.
using PolicyFactory = std::unique_ptr<ServingPolicy> (*)(TomlTable& table,
                                                         const Scenario& scenario);

class PolicyRegistry {
 public:
  // Registers `factory` under `name`. Precondition (checked): the name is not registered yet.
  void add(const std::string& name, PolicyFactory factory);
  // Builds the policy of one [policies.<name>] table. An unregistered name is a ConfigError at
  // the table, listing the valid names.
  std::unique_ptr<ServingPolicy> make(const PolicyConfig& config, const Scenario& scenario) const;
  // Registered names, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, PolicyFactory> factories_;
};

// A registry holding every policy shipped in sim/policy/.
PolicyRegistry builtin_policy_registry();

// The scenario's policies (scenario.policies, in file order) built through
// builtin_policy_registry(); empty when the scenario has none. Throws ConfigError.
std::vector<std::unique_ptr<ServingPolicy>> make_policies(const Scenario& scenario);

}  // namespace moesim::sim
