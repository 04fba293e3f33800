// Shared by the policy tests: scenarios built from text around the tiny model, and runs of
// shipped scenario files with their policies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"
#include "tests/support/config_errors.h"

namespace moesim::sim::testing {

inline const std::string kPolicyTestDir = MOESIM_SOURCE_DIR "/tests/data/scenarios";

// A small scenario (tiny model, one 8-GPU node, two replicas of 4 GPUs, synthetic traffic)
// followed by `extra` (e.g. [policies.*] tables, [[deployment.pools]] lines appended to the
// [deployment] table through `deployment_extra`), with `rate_per_s` arrivals.
inline Scenario tiny_scenario(const std::string& extra, const std::string& deployment_extra = "",
                              int rate_per_s = 20) {
  const std::string text = R"(name = "policy_test"
model = "../../../models/tiny.toml"
topology = "../../../topologies/h200-node.toml"
[deployment]
replicas = 2
gpus_per_replica = 4
)" + deployment_extra + R"(
[scheduler]
max_batch_tokens_per_gpu = 1024
workspace_gib = 1
[workload]
kind = "synthetic"
num_requests = 20
[workload.arrival]
rate_per_s = )" + std::to_string(rate_per_s) +
                           R"(
[workload.prompt_tokens]
distribution = "constant"
value = 300
[workload.output_tokens]
distribution = "constant"
value = 20
[run]
duration_s = 3
)" + extra;
  return parse_scenario_text(text, "policy_test.toml", kPolicyTestDir);
}

// tiny_scenario's two replicas as pools "short" and "long" (its `deployment_extra`).
inline const std::string kShortLongPools = R"([[deployment.pools]]
name = "short"
replicas = 1
[[deployment.pools]]
name = "long"
replicas = 1
)";

// Loads a shipped scenario (path relative to the source tree), optionally shortening its run,
// and simulates it with its policies, keeping every request's record (RunOptions::keep_requests).
inline RunOutput run_shipped(const std::string& rel_path, double duration_s = 0,
                             RunOptions options = {}) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/" + rel_path);
  if (duration_s > 0) sc.run.duration_s = duration_s;
  options.keep_requests = true;
  return run_scenario(sc, options, -1, make_policies(sc));
}

// "key.path: reason" of the ConfigError that building the policies of tiny_scenario(extra)
// throws, or "" when they build.
inline std::string policy_config_error(const std::string& extra) {
  return config_error_key_and_reason_of([&] { make_policies(tiny_scenario(extra)); });
}

// How many times a run counted action `name` (0 when never).
inline int64_t action_count(const RunOutput& out, const std::string& name) {
  auto it = out.counters.actions.find(name);
  return it == out.counters.actions.end() ? 0 : it->second;
}

}  // namespace moesim::sim::testing
