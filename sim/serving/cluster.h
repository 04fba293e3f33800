// The whole simulated cluster serving a workload: the Simulation (clock, events, RNG streams),
// the workload generator, the cluster router, one scheduler per replica (continuous batching
// with chunked prefill, memory-aware admission, preemption by recompute, prefix caching) and
// the step model. run() simulates the scenario's duration and returns what was measured.
//
// Events (the digest folds kind, replica / request ids and time): arrival, step_done,
// kv_transfer_done (P/D disaggregation). Conservation is checked at the end: every arrived
// request is completed, rejected or in flight, exactly once.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/metrics/run_metrics.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim {

// One executed step as the engine will replay it (docs/schemas/step_trace.md).
struct StepRecord {
  struct Seq {
    int32_t request = 0;
    int32_t gpu = 0;  // global GPU id of the attention rank (first GPU of a TP group)
    bool prefill = false;
    int64_t new_tokens = 0;
    int64_t context_tokens = 0;
  };
  struct Layer {
    int32_t layer = 0;
    // (src GPU, expert, dst GPU, count), global GPU ids, zero counts omitted.
    std::vector<std::array<int64_t, 4>> routing;
    double dispatch_bytes = 0;
    double combine_bytes = 0;
  };
  int64_t step = 0;
  int32_t replica = 0;
  SimTime start_ns = 0;
  SimTime end_ns = 0;
  std::vector<Seq> seqs;
  std::vector<Layer> layers;
};

// A span on one GPU's track for the Chrome trace; gpu == -1 marks an instant (a policy action)
// on the replica's process.
struct TraceSlice {
  int32_t replica = 0;
  int32_t gpu = 0;  // global GPU id, or -1
  std::string name;
  int32_t layer = -1;
  SimTime start_ns = 0;
  SimTime duration_ns = 0;
};

struct RunOptions {
  bool record_steps = false;
  int64_t record_max_steps = 1000;
  bool chrome_trace = false;
  SimTime trace_start_ns = 0;
  SimTime trace_end_ns = 0;
};

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
  // Expert placement at the start (after the policies' on_start): per routed expert, the global
  // GPU ids hosting it in any replica (replicas own disjoint GPUs).
  std::vector<std::vector<int32_t>> expert_gpus;
  // A replica's placement changed (e.g. a replication or balancing policy): from its recorded
  // step `step` on, routed expert e is on the replica's global GPUs expert_gpus[e]. In step order.
  struct PlacementChange {
    int32_t replica = 0;
    int64_t step = 0;
    std::vector<std::vector<int32_t>> expert_gpus;
  };
  std::vector<PlacementChange> placement_changes;
  bool conservation_ok = false;
  std::string conservation_message;
};

// Simulates `scenario` with its seed (or `seed_override` when >= 0) and the given policies
// (made from scenario.policies by sim/policy's make_policies; empty = none). Throws ConfigError
// when the deployment does not fit in memory.
RunOutput run_scenario(const Scenario& scenario, const RunOptions& options,
                       int64_t seed_override = -1,
                       std::vector<std::unique_ptr<ServingPolicy>> policies = {});

}  // namespace moesim::sim
