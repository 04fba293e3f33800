// One expert placement per MoE layer of a replica. Production balancers (EPLB) and replication
// place every MoE layer separately, and a layer's dispatch and combine use that layer's map; the
// static deployment starts every layer with the same placement. Memory is charged per slot: a
// GPU's routed-expert weights are one expert's weights per slot it holds, summed over layers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/placement/expert_placement.h"

namespace moesim::sim {

class LayerPlacements {
 public:
  // `num_moe_layers` (>= 1) layers, each with `placement`.
  LayerPlacements(int32_t num_moe_layers, const ExpertPlacement& placement);

  int32_t num_layers() const { return static_cast<int32_t>(layers_.size()); }
  const ExpertPlacement& layer(int32_t moe_layer_idx) const { return *layers_[moe_layer_idx]; }
  // The layer's placement version (sim/core/state_version.h): new whenever the layer changes.
  uint64_t version(int32_t moe_layer_idx) const { return versions_[moe_layer_idx]; }
  // Precondition (checked): same experts, GPUs, GPUs per node and shared experts as the others.
  void set_layer(int32_t moe_layer_idx, const ExpertPlacement& placement);
  // Every layer gets `placement` (same precondition).
  void set_all(const ExpertPlacement& placement);
  // Adds / removes a replica of an expert in one layer (ExpertPlacement's preconditions).
  void add_replica(int32_t moe_layer_idx, int32_t expert_idx, int32_t gpu_idx);
  void remove_replica(int32_t moe_layer_idx, int32_t expert_idx, int32_t gpu_idx);

  // The shape every layer shares.
  int32_t num_experts() const { return layers_.front()->num_experts(); }
  int32_t num_gpus() const { return layers_.front()->num_gpus(); }
  int32_t gpus_per_node() const { return layers_.front()->gpus_per_node(); }
  int32_t num_shared_experts() const { return layers_.front()->num_shared_experts(); }

  // Expert slots GPU `gpu_idx` holds over all layers, and the largest such total over GPUs (the
  // fullest GPU's routed-expert memory, in slots).
  int64_t total_slots(int32_t gpu_idx) const;
  int64_t max_total_slots_per_gpu() const;
  // Whether every layer has the same placement.
  bool uniform() const;

 private:
  void check_shape(const ExpertPlacement& placement) const;
  // The layer's placement, copied first when other layers (or copies of this object) share it.
  ExpertPlacement& own_layer(int32_t moe_layer_idx);

  // Layers with equal placements share one (copy on write): a deployment of ~60 MoE layers that
  // starts uniform holds one map, not ~60 copies of a few hundred small vectors.
  std::vector<std::shared_ptr<ExpertPlacement>> layers_;
  std::vector<uint64_t> versions_;  // per layer
};

}  // namespace moesim::sim
