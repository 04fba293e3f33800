// Policies by name: each [policies.<name>] table of a scenario becomes one ServingPolicy object
// per run. A PolicyRegistry maps names to factories; builtin_policy_registry() registers every
// shipped policy (one line each, in policy_registry.cc). resolve_policy_settings() parses and
// validates a scenario's tables once, right after it is loaded (files a table names are read
// then), and make_policies() builds the scenario's policies, in file order, for run_scenario().
//
// Rationale: make_policies() runs once per run (replications, sweep points, searches), so work
// that reads files belongs in the parse step, done once per scenario load. Policies whose table
// names no file keep a single-step factory: their settings are the validated table, read again
// per run (cheap).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim {

// A policy's parse step: reads every key it knows from `table` (raising ConfigError through it
// for bad values, so messages name file, line and key path), cross-checks the scenario and reads
// the files the table names. The registry calls table.finish() afterwards, so keys it did not
// read are "unknown key" errors. Returns non-null settings that never refer into the scenario.
using PolicyParser = std::shared_ptr<const PolicySettings> (*)(TomlTable& table,
                                                               const Scenario& scenario);
// A policy's maker: the policy of settings its parser returned (the maker may downcast them)
// for one run of `scenario`. Reads no file. The policy must not keep references into the scenario
// beyond the run, except into what the scenario shares (its model card, topology).
using PolicyMaker = std::unique_ptr<ServingPolicy> (*)(const PolicySettings& settings,
                                                       const Scenario& scenario);
// A single-step policy: builds the policy from its table, as a parser reads it (finish() is
// called afterwards). Runs once when the table is resolved (to validate it) and once per run.
using PolicyFactory = std::unique_ptr<ServingPolicy> (*)(TomlTable& table,
                                                         const Scenario& scenario);

class PolicyRegistry {
 public:
  // Registers a two-step policy under `name`. Precondition (checked): the name is not
  // registered yet; neither function is null.
  void add(const std::string& name, PolicyParser parse, PolicyMaker make);
  // Registers a single-step policy under `name`; same preconditions.
  void add(const std::string& name, PolicyFactory factory);

  // The settings of one [policies.<name>] table (config.settings is ignored). An unregistered
  // name is a ConfigError at the table, listing the valid names; so are the table's errors.
  std::shared_ptr<const PolicySettings> resolve(const PolicyConfig& config,
                                                const Scenario& scenario) const;
  // The policy of one table: from config.settings when set (resolved by this registry), else
  // resolved now. Throws ConfigError as resolve() does.
  std::unique_ptr<ServingPolicy> make(const PolicyConfig& config, const Scenario& scenario) const;
  // Registered names, sorted.
  std::vector<std::string> names() const;

 private:
  struct Entry {
    PolicyParser parse = nullptr;  // two-step policies
    PolicyMaker make = nullptr;
    PolicyFactory factory = nullptr;  // single-step policies
  };
  const Entry& entry(const PolicyConfig& config) const;

  std::map<std::string, Entry> entries_;
};

// A registry holding every policy shipped in sim/policy/.
PolicyRegistry builtin_policy_registry();

// Fills `settings` of every scenario.policies entry that has none, through
// builtin_policy_registry(): call once right after loading a scenario that runs follow. Throws
// ConfigError (unknown policy names, unknown keys, bad values, unreadable files).
void resolve_policy_settings(Scenario& scenario);

// The scenario's policies (scenario.policies, in file order) built through
// builtin_policy_registry(), from their resolved settings where set (then no file is read) and
// by resolving the table otherwise; empty when the scenario has none. Throws ConfigError.
std::vector<std::unique_ptr<ServingPolicy>> make_policies(const Scenario& scenario);

}  // namespace moesim::sim
