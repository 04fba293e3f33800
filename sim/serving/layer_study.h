// The teaching case of issue 4: per-layer communication versus expert compute for one decode
// step as the batch grows. For each batch size (sequences per GPU), one decode step of the
// scenario's replica 0 is simulated with the scenario's routing skew and with uniform routing;
// the step model's own spans give, per MoE layer averaged over layers, the dispatch + combine
// time, the slowest GPU's expert time, the mean GPU's expert time and the barrier wait. The
// crossover (where the all-to-all outgrows expert compute) is read off the model, not written
// in.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/scenario/scenario.h"

namespace moesim::sim {

struct LayerStudyRow {
  int64_t seqs_per_gpu = 0;
  bool skewed = false;
  double comm_us = 0;         // dispatch + combine per MoE layer
  double expert_max_us = 0;   // slowest GPU's routed + shared experts per MoE layer
  double expert_mean_us = 0;  // mean over GPUs
  double wait_mean_us = 0;    // mean barrier wait per GPU per MoE layer
  double step_ms = 0;         // the whole decode step
};

// Rows for every batch size, skewed (the scenario's routing) then uniform. Context per
// sequence: `context_tokens`. Throws ConfigError when the model has no MoE layer.
std::vector<LayerStudyRow> run_layer_study(const Scenario& scenario,
                                           const std::vector<int64_t>& seqs_per_gpu,
                                           int64_t context_tokens, uint64_t seed);

}  // namespace moesim::sim
