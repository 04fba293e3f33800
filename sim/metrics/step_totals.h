// A step's traffic and expert-balance totals over its MoE layers, as the step model measures them
// (StepResult in sim/serving/step_model.h extends it) and the run recorder sums them.
#pragma once

#include <cstdint>

namespace moesim::sim {

struct StepTotals {
  double dispatch_bytes = 0;  // all MoE layers, all GPUs
  double combine_bytes = 0;
  // Routed selections of the hottest GPU over the mean, summed over MoE layers (imbalance).
  double max_gpu_selections = 0;
  double mean_gpu_selections = 0;
  // Balance per MoE layer as operators measure it, summed over the step's MoE layers with the
  // number of layers summed: r = (max - mean) / mean (imbalance) and b = mean / max
  // (balancedness). By GPU: over the replica's GPUs, of the routed selections each receives; a
  // layer without selections is not counted. By slot: over the layer's expert slots (one per
  // replica of an expert), of the selections each slot serves: the dispatcher's per-slot counts
  // where the layer has replicas and is dispatched per expert; otherwise (the per-GPU fast path
  // draws no per-expert counts) the routing model's expected selections per expert
  // (RoutingModel::expected_shares x the step's tokens, as expert_loads; split evenly over an
  // expert's replicas), so the slot figure is an expectation there. A layer without slot loads
  // (no expectation, or all zero) is not counted.
  double gpu_imbalance_sum = 0;
  double gpu_balancedness_sum = 0;
  int64_t num_gpu_balance_layers = 0;
  double slot_imbalance_sum = 0;
  double slot_balancedness_sum = 0;
  int64_t num_slot_balance_layers = 0;
  // With the fast fidelity on (StepModelOptions::fidelity): MoE layers it timed, and those it left to
  // the exact fidelity. Both 0 on the exact fidelity.
  int64_t num_fast_layers = 0;
  int64_t num_exact_layers = 0;
};

}  // namespace moesim::sim
