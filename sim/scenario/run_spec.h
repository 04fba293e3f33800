// The [run] table of a scenario: seed, duration, the step model's fidelity, and the measured
// window (warm-up, convergence target, extension up to max_duration_s; sim/metrics/steady_state.h,
// docs/outputs.md "Steady state"). Keys: docs/scenarios.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/config/toml_source.h"
#include "sim/metrics/steady_state.h"
#include "sim/scenario/fidelity.h"

namespace moesim::sim {

struct RunSpec {
  uint64_t seed = 1;
  double duration_s = 60;  // simulated time; requests still running then are "in flight"
  Fidelity fidelity = Fidelity::kExact;
  // The measured window (sim/metrics/steady_state.h): warm-up (absent: detected) and the
  // half-width that counts as converged.
  SteadyStateSpec steady;
  // A run not converged at duration_s is extended by duration_s at a time up to this (>=
  // duration_s; absent: never extended).
  std::optional<double> max_duration_s;
};

// Parses [run] (its path, e.g. "run") and calls t.finish(). `network_model`: the scenario's, which
// the fast fidelity must support.
RunSpec parse_run(TomlTable& t, const std::string& network_model);

}  // namespace moesim::sim
