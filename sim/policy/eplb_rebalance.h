// EPLB-style rebalancing: the decision logic of the eplb policy (the serving loop owns the
// events; eplb_policy.h wires them).
//
// Every MoE layer is balanced on its own, as EPLB does, from that layer's moving-average expert
// loads: balance_experts() (sim/placement/eplb.h) gives a layout, whose GPUs are relabelled to
// keep as many experts where they are as possible (a GPU permutation changes no load); the diff
// against the current placement is the weight copies and drops; a layer is left as it is without
// loads, when nothing changes, or when its predicted imbalance would not fall by more than
// min_imbalance_gain. docs/policies/eplb.md ("In the serving loop") has the steps.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim/placement/eplb.h"
#include "sim/placement/expert_placement.h"
#include "sim/policy/hot_expert_replication.h"

namespace moesim::sim {

class TomlTable;

// [policies.eplb]: the balancer's keys (EplbConfig, sim/placement/eplb.h) and the rest here.
struct EplbPolicyConfig {
  EplbConfig balance;
  // A rebalance applies only when it lowers the predicted imbalance by more than this, >= 0.
  double min_imbalance_gain = 0.0;
};

// Parses [policies.eplb] for an EP group of num_gpus GPUs on num_nodes nodes serving num_experts
// experts in num_groups groups; calls finish(). Unknown keys and out-of-range values are
// ConfigErrors with key paths.
EplbPolicyConfig parse_eplb_policy_config(TomlTable& table, int32_t num_experts, int32_t num_groups,
                                          int32_t num_nodes, int32_t num_gpus);

struct EplbPlan {
  enum class Decision { kApply, kNoLoad, kUnchanged, kNoGain };
  int32_t moe_layer_idx = 0;
  Decision decision = Decision::kNoLoad;
  std::optional<ExpertPlacement> target;  // set unless kNoLoad
  std::vector<ReplicaAddition> copies;    // by (expert, destination GPU)
  std::vector<ReplicaRemoval> drops;      // by (expert, GPU)
  double current_imbalance = 1.0;         // predicted, under the layer's averaged loads
  double target_imbalance = 1.0;
};

class EplbRebalancer {
 public:
  // initial: the shape every MoE layer's placement has (experts, GPUs, nodes). slot_weight_bytes:
  // the bytes of one expert in one MoE layer (one copy), > 0. Preconditions (checked): config
  // parsed for these dimensions, num_moe_layers >= 1.
  EplbRebalancer(const EplbPolicyConfig& config, int32_t num_moe_layers,
                 const ExpertPlacement& initial, int32_t num_groups, double slot_weight_bytes);

  const EplbPolicyConfig& config() const { return config_; }
  const EplbShape& shape() const { return shape_; }
  // One sample of a layer's expected selections per expert.
  void observe(int32_t moe_layer_idx, std::span<const double> selections);
  // The per-layer moving averages (observe()).
  const ExpertLoadAverage& load_average() const { return average_; }
  // The rebalance of the file comment for one MoE layer, whose placement is `current`, under its
  // current averages.
  EplbPlan plan(int32_t moe_layer_idx, const ExpertPlacement& current) const;
  // Bytes to copy per (src, dst) for all of `plans`: bytes[src * P + dst] for the P GPUs.
  std::vector<double> transfer_traffic(std::span<const EplbPlan> plans) const;

  // Per GPU: the sum of its experts' loads, each split evenly over the expert's replicas.
  static std::vector<double> gpu_loads(const ExpertPlacement& placement,
                                       std::span<const double> expert_loads);
  // max / mean of gpu_loads (1 when the loads sum to 0).
  static double imbalance(const ExpertPlacement& placement, std::span<const double> expert_loads);
  // `target` with its GPUs relabelled to match `current` (step 2 of the file comment).
  // Precondition (checked): same experts, GPUs and GPUs per node.
  static ExpertPlacement align_to(const ExpertPlacement& target, const ExpertPlacement& current);

 private:
  EplbPolicyConfig config_;
  EplbShape shape_;
  int32_t num_gpus_;
  int32_t gpus_per_node_;
  int32_t num_shared_experts_;
  double slot_weight_bytes_;
  ExpertLoadAverage average_;
};

}  // namespace moesim::sim
