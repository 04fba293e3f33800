// The fidelity check's samples and their agreement (docs/fast_fidelity.md): the steps a run
// also timed on the other fidelity (FidelityChecker, fidelity_checker.h, with RunOptions::
// fidelity_check_every), and the relative differences of their durations.
#pragma once

#include <cstdint>
#include <span>

#include "sim/core/time.h"

namespace moesim::sim {

struct FidelitySample {
  int32_t replica = 0;
  int64_t step = 0;
  SimTime exact_ns = 0;
  SimTime fast_ns = 0;
  // MoE layers the fast fidelity timed / left to the exact fidelity in this step.
  int64_t fast_layers = 0;
  int64_t exact_layers = 0;
};

// Agreement of the sampled steps' durations: the fast fidelity's over the exact fidelity's, as
// relative differences (fast / exact - 1) of the mean, the p50 and the p99 of the step durations,
// and the largest per-step relative difference. count 0: no samples (every figure 0).
struct FidelityAgreement {
  int64_t count = 0;
  int64_t skipped = 0;  // sampled steps not compared (a background transfer in flight)
  double exact_mean_ms = 0, fast_mean_ms = 0;
  double exact_p50_ms = 0, fast_p50_ms = 0;
  double exact_p99_ms = 0, fast_p99_ms = 0;
  double mean_rel = 0, p50_rel = 0, p99_rel = 0;
  double max_step_rel = 0;  // max over steps of |fast / exact - 1|
  // Share of the sampled steps' MoE layers the fast fidelity timed (1: all; the rest fell back).
  double fast_layer_share = 0;
};

FidelityAgreement fidelity_agreement(std::span<const FidelitySample> samples, int64_t skipped);

}  // namespace moesim::sim
