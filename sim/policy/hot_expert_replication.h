// Hot-expert replication: the decision logic of the policy (the serving loop owns the events).
//
// Every period_s the policy takes the hottest top_fraction of the experts over a sliding window
// of loads and gives each extra replicas (one on every node lacking one, or k more GPUs),
// dropping the replicas it added for experts no longer hot; the replicas of the base placement
// are never removed. A plan lists additions (each a weight copy from a GPU that keeps the
// expert) and removals, and the serving loop applies an addition only when its copy lands.
// Every choice (hot set, destination, source) is deterministic, ties to the lower id.
// docs/policies/hot_expert_replication.md ("Model") has the rules.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/time.h"
#include "sim/placement/expert_placement.h"

namespace moesim::sim {

class TomlTable;

// [policies.hot_expert_replication]; defaults in brackets.
struct HotExpertReplicationConfig {
  double window_s = 300.0;      // sliding window of expert loads, > 0
  int32_t window_buckets = 30;  // the window is kept in this many time buckets, >= 1
  double top_fraction = 0.1;    // hottest fraction of experts replicated, in (0, 1]
  enum class Target { kEveryNode, kKGpus } target = Target::kEveryNode;  // "every_node"|"k_gpus"
  int32_t k = 2;                        // k_gpus: extra replicas per hot expert, >= 1
  double period_s = 60.0;               // seconds between refreshes, > 0
  int32_t max_extra_slots_per_gpu = 2;  // extra expert slots a GPU may receive, >= 1
};

// Parses the table (keys as the struct's members; target as a string); calls finish(). Unknown
// keys and out-of-range values are ConfigErrors with key paths.
HotExpertReplicationConfig parse_hot_expert_replication_config(TomlTable& table);

// Per-expert loads over a sliding time window, in time buckets of window / num_buckets: the
// window at time t covers the bucket holding t and the num_buckets - 1 before it (so between
// window - bucket and window of history). O(num_buckets x experts) memory.
class ExpertLoadWindow {
 public:
  // Preconditions (checked): num_experts >= 1, num_buckets >= 1, window_ns >= num_buckets.
  ExpertLoadWindow(int32_t num_experts, SimTime window_ns, int32_t num_buckets);

  // Adds loads (e.g. one layer's expected selections per expert in one step) observed at now_ns.
  // Precondition (checked): now_ns >= every earlier now_ns, loads.size() == num_experts.
  void add(SimTime now_ns, std::span<const double> loads);
  // Summed loads per expert in the window ending at now_ns (>= the last add's time).
  std::vector<double> loads(SimTime now_ns) const;

 private:
  int64_t bucket_of(SimTime t) const { return t / bucket_ns_; }

  int32_t num_experts_;
  int32_t num_buckets_;
  SimTime bucket_ns_;
  SimTime last_ns_ = 0;
  std::vector<int64_t> bucket_id_;  // per ring slot: the absolute bucket it holds, -1 empty
  std::vector<double> sums_;        // ring slot x expert
};

// One weight copy: expert_idx from src_gpu_idx to dst_gpu_idx (EP-group GPU indices).
struct ReplicaAddition {
  int32_t expert_idx = 0;
  int32_t src_gpu_idx = 0;
  int32_t dst_gpu_idx = 0;
};
struct ReplicaRemoval {
  int32_t expert_idx = 0;
  int32_t gpu_idx = 0;
};

struct ReplicationPlan {
  std::vector<int32_t> hot_experts;        // hottest first
  std::vector<ReplicaAddition> additions;  // in decision order
  std::vector<ReplicaRemoval> removals;    // by (expert, GPU)
  int32_t num_skipped_for_capacity = 0;    // wanted replicas with no free extra slot
  bool empty() const { return additions.empty() && removals.empty(); }
};

class HotExpertReplication {
 public:
  // base: the static placement (its replicas are never removed; extra slots are counted over
  // it). replica_weight_bytes: HBM one replica occupies and the bytes its copy sends (the
  // expert's weights in the MoE layers the placement serves: one layer in the serving loop), > 0.
  HotExpertReplication(const HotExpertReplicationConfig& config, ExpertPlacement base,
                       double replica_weight_bytes);

  const HotExpertReplicationConfig& config() const { return config_; }
  const ExpertPlacement& base() const { return base_; }
  // A window sized from the config for this placement's experts.
  ExpertLoadWindow make_window() const;

  // The plan that turns `current` into the desired placement for these window loads (one
  // non-negative value per expert). Precondition (checked): current has the base's experts and
  // GPUs and holds every base replica.
  ReplicationPlan plan(std::span<const double> expert_loads, const ExpertPlacement& current) const;
  // Applies removals, then additions, to `placement` (all at once; the serving loop instead
  // applies each addition when its copy lands).
  static void apply(const ReplicationPlan& plan, ExpertPlacement& placement);
  // Bytes to copy per (src, dst): bytes[src * P + dst] for the P GPUs (diagonal zero).
  std::vector<double> transfer_traffic(const ReplicationPlan& plan) const;
  // HBM the plan's additions occupy per GPU (reserve it before the copy starts), and the HBM its
  // removals free.
  std::vector<double> extra_weight_bytes_per_gpu(const ReplicationPlan& plan) const;
  std::vector<double> freed_weight_bytes_per_gpu(const ReplicationPlan& plan) const;

 private:
  HotExpertReplicationConfig config_;
  ExpertPlacement base_;
  double replica_weight_bytes_;
};

}  // namespace moesim::sim
