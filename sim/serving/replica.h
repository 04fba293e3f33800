// One model replica of a run as ReplicaBuilder builds it whole: its GPUs, placements, routing,
// network and step model (ReplicaParts), the check replica on the other fidelity when the run
// checks tiers, its scheduler over the memory layout, and the state the cluster's handlers keep for
// it (busy, step index, background transfers, expert-memory bookkeeping of placement policies).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "sim/core/ids.h"
#include "sim/core/time.h"
#include "sim/memory/memory_layout.h"
#include "sim/metrics/run_recorder.h"
#include "sim/network/network_model.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/routing/routing_model.h"
#include "sim/serving/replica_scheduler.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {

class ServingPolicy;

// What one replica runs on. The step model points into the other members: keep them together
// (moving the struct is fine, the members are heap-allocated).
struct ReplicaParts {
  std::vector<GpuId> gpus;
  std::unique_ptr<LayerPlacements> placements;  // per MoE layer; null without MoE layers
  std::unique_ptr<RoutingModel> routing;        // null without MoE layers
  std::unique_ptr<NetworkModel> network;        // null without MoE layers
  std::unique_ptr<StepModel> step_model;
};

struct Replica {
  int32_t idx = 0;
  ReplicaParts parts;  // GPUs, placement, routing, network, step model
  // With a fidelity check: network and step model of the other fidelity over the same GPUs,
  // placements and routing model (no placements or routing of its own). Empty otherwise.
  ReplicaParts check;
  std::unique_ptr<ReplicaScheduler> scheduler;
  // The memory layout of each of its GPUs (every replica's GPUs alike).
  GpuMemoryLayout layout;
  // Background transfers its dispatch collectives carry (heap-allocated: the step model points
  // to it), and the policy that started each.
  std::unique_ptr<std::vector<BackgroundTransfer>> transfers =
      std::make_unique<std::vector<BackgroundTransfer>>();
  std::map<int64_t, ServingPolicy*> transfer_owner;
  // Routed-expert slots, summed over MoE layers, that the memory layout holds on every GPU (the
  // fullest GPU's at layout time); slots beyond them take KV blocks from the GPU's rank.
  int64_t layout_total_slots = 0;
  std::vector<int64_t> placement_extra_blocks;  // per rank: KV blocks held for those slots
  // Bumped by every placement change; the step recorder compares placements only when it moved.
  int64_t placement_version = 0;
  int64_t recorded_placement_version = -1;
  bool prefill_only = false;
  bool decode_only = false;
  bool busy = false;
  int64_t step_idx = 0;
  SimTime last_step_ns = 0;       // the previous step's duration (host-link contention's window)
  std::vector<GpuId> draft_gpus;  // speculative decoding's draft GPUs of its own (none: empty)
  // The running step's expert loads (StepResult::expert_loads), for the policies at its end.
  std::vector<double> step_expert_loads;

  const std::vector<GpuId>& gpus() const { return parts.gpus; }
  StepModel& step_model() const { return *parts.step_model; }
  // Every MoE layer's placement (null without MoE layers).
  LayerPlacements* placements() const { return parts.placements.get(); }
  // GPUs per attention rank.
  int32_t tp() const { return static_cast<int32_t>(parts.gpus.size()) / scheduler->num_ranks(); }
  // Routed expert -> the global GPU ids hosting it in MoE layer `moe_layer_idx`.
  ExpertGpus expert_gpus(int32_t moe_layer_idx) const;
};

// Adds r's scheduler totals (prompt tokens, cache hits, preemptions, evictions) to the recorder's
// counters and each rank's KV high water to its GPUs' records, at the end of a run.
void add_replica_totals(const Replica& r, RunRecorder& recorder);

}  // namespace moesim::sim
