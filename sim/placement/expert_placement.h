// Experts and their replicas on the GPUs of one expert-parallel (EP) group.
//
// GPUs are numbered 0..num_gpus-1 within the EP group (the same numbering as the routing
// model's source GPUs); GPU g sits on node g / gpus_per_node. Every routed expert has at least
// one replica; each replica occupies one expert slot on its GPU. Shared experts run on every GPU
// on that GPU's own tokens and take no routed slot.
//
// Token-to-replica rule (dispatch_to_gpus): the selections of source GPU s for expert e go to
//  1. s itself when s hosts a replica of e; else
//  2. the replicas of e on s's node, if any; else
//  3. all replicas of e;
// in cases 2 and 3 each selection goes to the candidate that has received the fewest selections
// so far in this dispatch (all experts counted), ties to the lowest GPU id. (source, expert)
// cells are processed in source-major, expert-minor order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/routing/count_matrix.h"

namespace moesim::sim {

class TomlTable;

class ExpertPlacement {
 public:
  // Expert e on GPU e / (num_experts / num_gpus): consecutive experts share a GPU.
  // Throws ConfigError (naming `source`) unless num_gpus divides num_experts.
  static ExpertPlacement contiguous(int32_t num_experts, int32_t num_gpus, int32_t gpus_per_node,
                                    int32_t num_shared_experts, const std::string& source);
  // Expert e on GPU e mod num_gpus: consecutive experts on different GPUs.
  // Throws ConfigError unless num_gpus divides num_experts.
  static ExpertPlacement strided(int32_t num_experts, int32_t num_gpus, int32_t gpus_per_node,
                                 int32_t num_shared_experts, const std::string& source);
  // An explicit layout: replicas_of_expert[e] lists the GPUs hosting e. Throws ConfigError
  // (naming `source`) for an expert without a replica, a GPU out of range, a GPU listed twice for
  // one expert, or gpus_per_node not dividing num_gpus.
  ExpertPlacement(int32_t num_experts, int32_t num_gpus, int32_t gpus_per_node,
                  int32_t num_shared_experts, std::vector<std::vector<int32_t>> replicas_of_expert,
                  const std::string& source);

  // Adds a replica of expert_idx on gpu_idx (for replication policies). Preconditions
  // (checked): both in range and gpu_idx does not already host the expert.
  void add_replica(int32_t expert_idx, int32_t gpu_idx);
  // Removes the replica of expert_idx on gpu_idx. Preconditions (checked): it exists and is not
  // the expert's last replica.
  void remove_replica(int32_t expert_idx, int32_t gpu_idx);

  int32_t num_experts() const { return num_experts_; }
  int32_t num_gpus() const { return num_gpus_; }
  int32_t gpus_per_node() const { return gpus_per_node_; }
  int32_t num_shared_experts() const { return num_shared_experts_; }
  int32_t node_of(int32_t gpu_idx) const { return gpu_idx / gpus_per_node_; }

  // GPUs hosting an expert, ascending.
  std::span<const int32_t> replicas(int32_t expert_idx) const { return replicas_[expert_idx]; }
  // Routed experts hosted by a GPU, ascending (one slot each).
  std::span<const int32_t> experts_on(int32_t gpu_idx) const { return experts_on_gpu_[gpu_idx]; }
  int32_t num_slots(int32_t gpu_idx) const {
    return static_cast<int32_t>(experts_on_gpu_[gpu_idx].size());
  }
  int32_t max_slots_per_gpu() const;
  // Replicas over all experts (cached: has_replicas() is asked once per MoE layer of a step).
  int32_t total_slots() const { return total_slots_; }
  bool has_replicas() const { return total_slots_ > num_experts_; }
  // The first (lowest) GPU of each expert: the expert -> GPU map of the routing fast path, exact
  // when !has_replicas().
  std::span<const int32_t> primary_gpu_of_expert() const { return primary_gpu_; }

 private:
  ExpertPlacement() = default;
  void rebuild_derived();

  int32_t num_experts_ = 0;
  int32_t num_gpus_ = 0;
  int32_t gpus_per_node_ = 1;
  int32_t num_shared_experts_ = 0;
  std::vector<std::vector<int32_t>> replicas_;
  std::vector<std::vector<int32_t>> experts_on_gpu_;
  std::vector<int32_t> primary_gpu_;
  int32_t total_slots_ = 0;  // sum of replicas_[e].size(), kept by rebuild_derived()
};

// Applies the token-to-replica rule (file comment) to one layer's selections.
class ReplicaDispatcher {
 public:
  // src_expert: num_gpus x num_experts (sources are the placement's GPUs). Resets src_dst to
  // num_gpus x num_gpus; every selection lands on exactly one GPU hosting its expert.
  void dispatch(const ExpertPlacement& placement, const CountMatrix& src_expert,
                CountMatrix& src_dst);
  // Selections received per expert slot in the last dispatch, in (expert, replica) order:
  // expert e's replicas occupy [slot_offset(e), slot_offset(e + 1)), in replicas(e) order.
  std::span<const int64_t> slot_loads() const { return slot_loads_; }
  int32_t slot_offset(int32_t expert_idx) const { return slot_offsets_[expert_idx]; }

 private:
  void water_fill(int64_t count, int32_t expert_idx, const ExpertPlacement& placement,
                  std::span<int32_t> dst_row);

  std::vector<int64_t> gpu_load_;
  std::vector<int64_t> slot_loads_;
  std::vector<int32_t> slot_offsets_;
  std::vector<int32_t> candidates_;  // replica positions within replicas(e)
};

// A placement per MoE layer: one default, replaced for some layers.
class PlacementPlan {
 public:
  PlacementPlan(int32_t num_moe_layers, ExpertPlacement default_placement);
  // Uses `placement` for MoE layers first..last (inclusive). Precondition: same experts and GPUs.
  void set_layers(int32_t first_layer, int32_t last_layer, ExpertPlacement placement);
  const ExpertPlacement& layer(int32_t moe_layer_idx) const {
    return placements_[index_of_layer_[moe_layer_idx]];
  }
  ExpertPlacement& mutable_layer(int32_t moe_layer_idx);
  int32_t num_moe_layers() const { return static_cast<int32_t>(index_of_layer_.size()); }

 private:
  std::vector<ExpertPlacement> placements_;
  std::vector<int32_t> index_of_layer_;
};

// Parses a [placement] table (docs/routing.md, "Placement"):
//   layout = "contiguous" | "strided" (default "contiguous")
//   [[placement.replicas]] expert = E, gpus = [g, ...]   extra replicas of one expert
//   [[placement.layer_overrides]] layers = [first, last], layout = ..., [[...replicas]]
// Calls finish(); errors are ConfigError with key paths.
PlacementPlan parse_placement(TomlTable& table, int32_t num_moe_layers, int32_t num_experts,
                              int32_t num_gpus, int32_t gpus_per_node, int32_t num_shared_experts);

}  // namespace moesim::sim
