// The tier check: the same steps timed by both tiers (docs/fast_tier.md).
//
// With RunOptions::tier_check_every = N > 0, every N-th step of every replica (step index a
// multiple of N) is also run by a shadow step model on the other tier: the same batch, placement
// and routing model (whose draws depend only on the seed, the layer, the step and the tokens,
// not on the order of calls). The shadow never changes the run: its durations are only
// recorded. Steps with a background transfer in flight are skipped (the shadow carries none).
#pragma once

#include <cstdint>
#include <span>

#include "sim/core/time.h"

namespace moesim::sim {

struct TierSample {
  int32_t replica = 0;
  int64_t step = 0;
  SimTime exact_ns = 0;
  SimTime fast_ns = 0;
  // MoE layers the fast tier timed / left to the exact tier in this step.
  int64_t fast_layers = 0;
  int64_t exact_layers = 0;
};

// Agreement of the sampled steps' durations: the fast tier's over the exact tier's, as relative
// differences (fast / exact - 1) of the mean, the p50 and the p99 of the step durations, and the
// largest per-step relative difference. count 0: no samples (every figure 0).
struct TierAgreement {
  int64_t count = 0;
  int64_t skipped = 0;  // sampled steps not compared (a background transfer in flight)
  double exact_mean_ms = 0, fast_mean_ms = 0;
  double exact_p50_ms = 0, fast_p50_ms = 0;
  double exact_p99_ms = 0, fast_p99_ms = 0;
  double mean_rel = 0, p50_rel = 0, p99_rel = 0;
  double max_step_rel = 0;  // max over steps of |fast / exact - 1|
  // Share of the sampled steps' MoE layers the fast tier timed (1: all; the rest fell back).
  double fast_layer_share = 0;
};

TierAgreement tier_agreement(std::span<const TierSample> samples, int64_t skipped);

}  // namespace moesim::sim
