// The whole simulated cluster serving a workload: the Simulation (clock, events, RNG streams),
// the workload generator, the cluster router, one scheduler per replica (continuous batching
// with chunked prefill, memory-aware admission, preemption by recompute, prefix caching) and
// the step model. run() simulates the scenario's duration and returns what was measured.
//
// Events (the digest folds kind, replica / request ids and time): arrival, step_done,
// kv_transfer_done (P/D disaggregation). Conservation is checked at the end: every arrived
// request is completed, rejected or in flight, exactly once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/metrics/run_metrics.h"
#include "sim/metrics/run_recorder.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/fidelity_check.h"
#include "sim/serving/serving_policy.h"
#include "sim/serving/speculative.h"

namespace moesim::sim {

struct RunOutput {
  std::vector<RequestRecord> requests;
  std::vector<GpuRecord> gpus;
  RunCounters counters;
  RunSummary summary;
  uint64_t digest = 0;
  std::string digest_hex;
  uint64_t num_events = 0;
  SimTime end_ns = 0;
  std::vector<TraceSlice> trace;
  std::vector<StepRecord> steps;
  // RunOptions::step_series: every executed step of every replica, in execution order.
  std::vector<StepSeriesRow> step_series;
  // Expert placement of MoE layer 0 at the start (after the policies' on_start): per routed
  // expert, the global GPU ids hosting it in any replica (replicas own disjoint GPUs).
  std::vector<std::vector<int32_t>> expert_gpus;
  // Placement changes between recorded steps (run_recorder.h), in step order; a layer whose
  // placement differs from layer 0's at the start appears at its replica's first recorded step.
  using PlacementChange = ::moesim::sim::PlacementChange;
  std::vector<PlacementChange> placement_changes;
  // RunOptions::expert_selections: per MoE layer (model order), per routed expert, the expected
  // selections summed over every executed step (drafts excluded); empty without it or when the
  // routing model states no expectation.
  std::vector<std::vector<double>> expert_selections;
  bool conservation_ok = false;
  std::string conservation_message;
  // RunOptions::fidelity_check_every > 0: the sampled steps timed on both fidelities
  // (fidelity_check.h), and the sampled steps skipped (a background transfer in flight).
  bool fidelity_checked = false;
  std::vector<FidelitySample> fidelity_samples;
  int64_t fidelity_samples_skipped = 0;
  // Speculative decoding ([speculative]): acceptance and draft-time totals; all 0 without it.
  SpeculativeTotals speculative;
  // RunOptions::stop_on_certain_failure: why the run stopped at end_ns, before its duration
  // (a limit that fails whatever the rest of the run does); empty when it ran to its end.
  std::string stopped_early;
  // RunOptions::cancel was set: the run stopped at end_ns, its outputs are partial.
  bool cancelled = false;
};

// Simulates `scenario` with its seed (or `seed_override` when >= 0) and the given policies
// (made from scenario.policies by sim/policy's make_policies; empty = none). Throws ConfigError
// when the deployment does not fit in memory, and when options.record_steps asks to record a
// deployment with per-layer placements ([deployment] placement = "eplb", not yet in the schema).
RunOutput run_scenario(const Scenario& scenario, const RunOptions& options,
                       int64_t seed_override = -1,
                       std::vector<std::unique_ptr<ServingPolicy>> policies = {});

}  // namespace moesim::sim
