#include "sim/study/simulate.h"

#include "sim/policy/policy_registry.h"

namespace moesim::sim::study {

RunOutput simulate(const Scenario& scenario, uint64_t seed, bool keep_requests) {
  RunOptions options;
  options.keep_requests = keep_requests;
  return simulate(scenario, seed, options);
}

RunOutput simulate(const Scenario& scenario, uint64_t seed, const RunOptions& options) {
  return run_scenario(scenario, options, static_cast<int64_t>(seed), make_policies(scenario));
}

int64_t num_gpus(const Scenario& scenario) {
  return static_cast<int64_t>(scenario.deployment.num_replicas) *
         scenario.deployment.gpus_per_replica;
}

}  // namespace moesim::sim::study
