// One simulation of a scenario as the study tools run it: the scenario's policies (made by the
// policy registry), no trace or step recording.
#pragma once

#include <cstdint>

#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim::study {

// Simulates `scenario` with root seed `seed` and the policies of its [policies.*] tables;
// RunOutput::requests holds every record only with `keep_requests` (compare pairs them up).
// Throws ConfigError for a bad policy table or a deployment that does not fit in memory.
RunOutput simulate(const Scenario& scenario, uint64_t seed, bool keep_requests = false);
// The same with the given run options (e.g. a search probe's early verdict,
// RunOptions::stop_on_certain_failure).
RunOutput simulate(const Scenario& scenario, uint64_t seed, const RunOptions& options);

// GPUs the deployment occupies: replicas x GPUs per replica.
int64_t num_gpus(const Scenario& scenario);

}  // namespace moesim::sim::study
