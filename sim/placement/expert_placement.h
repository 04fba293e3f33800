// Experts and their replicas on the GPUs of one expert-parallel (EP) group.
//
// GPUs are numbered 0..num_gpus-1 within the group (the routing model's source GPUs), node
// g / gpus_per_node. Every routed expert has at least one replica, each in one slot of its GPU;
// shared experts run on every GPU and take no slot. The token-to-replica rule (ReplicaDispatcher)
// sends a source's selections of an expert to the replicas on its node, else to all, each to the
// least loaded so far: the even split balancers size replicas for, which a keep-local rule would
// break. docs/routing.md ("Placement") has the layouts and the rule.
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
  // The rule applied to one layer's totals (the fast fidelity, docs/fast_fidelity.md), for sources
  // in groups (consecutive sources of one node: group j holds group_tokens[j] tokens on node
  // group_node[j]): expert e's expert_totals[e] selections come from the groups in proportion to
  // their tokens, and each group's part is dispatched as one source's would be (its node's
  // replicas of e, else all of them; water-filled), group-major and expert-minor as dispatch()
  // is source-major. Writes the selections per destination GPU into dst_totals, and those of
  // them from sources on the destination's own node into local_totals; slot_loads() as after
  // dispatch(). With one group per source and each source's selections in proportion to its
  // tokens, this is dispatch() on those selections.
  void dispatch_totals(const ExpertPlacement& placement, std::span<const int64_t> expert_totals,
                       std::span<const int64_t> group_tokens, std::span<const int32_t> group_node,
                       std::vector<int64_t>& dst_totals, std::vector<int64_t>& local_totals);
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
  std::vector<int32_t> candidates_;   // replica positions within replicas(e)
  std::vector<int32_t> dst_scratch_;  // dispatch_totals: selections per destination GPU
  std::vector<int32_t> before_;       // dispatch_totals: per candidate, before a water-fill
  // Resets gpu_load_, slot_offsets_ and slot_loads_ for a dispatch over `placement`.
  void begin(const ExpertPlacement& placement);
};

}  // namespace moesim::sim
