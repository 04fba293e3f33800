// EPLB-style expert load balancing (after DeepSeek's Expert Parallelism Load Balancer).
//
// From each logical expert's load and a number of physical slots, choose how many replicas each
// expert gets (each redundant slot to the largest load per replica) and on which GPUs they sit
// (balanced packing, heaviest first); hierarchically (whole expert groups to nodes first) when
// the groups divide evenly over the nodes, so group-limited routing keeps its node locality.
// Every choice is an argmin / argmax scan in index order, so ties are deterministic, and two
// replicas of one expert never share a GPU. docs/policies/eplb.md ("Model") has the steps, the
// tie-breaking and the swap that keeps replicas apart.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/placement/expert_placement.h"

namespace moesim::sim {

class TomlTable;

// Dimensions of one balancing problem.
struct EplbShape {
  int32_t num_experts = 1;         // logical routed experts per layer, >= 1
  int32_t num_physical_slots = 1;  // experts + redundant replicas; a multiple of num_gpus
  int32_t num_groups = 1;          // expert groups, divides num_experts
  int32_t num_nodes = 1;           // divides num_gpus
  int32_t num_gpus = 1;            // GPUs of the EP group, >= 1
};

// Checks the invariants above and num_physical_slots >= num_experts; throws ConfigError naming
// `source` and the offending field.
void validate_eplb_shape(const EplbShape& shape, const std::string& source);

// Whether balance_experts uses the hierarchical variant: num_groups % num_nodes == 0 (and more
// than one node; one node makes both variants equal).
bool eplb_is_hierarchical(const EplbShape& shape);

// One layer's balanced layout. Physical slot p lies on GPU p / (num_physical_slots / num_gpus).
struct EplbLayout {
  std::vector<int32_t> physical_to_logical;  // per physical slot: its expert
  std::vector<int32_t> replica_count;        // per expert: replicas (>= 1)
  // Per expert: the GPUs of its replicas, ascending (ExpertPlacement's replicas_of_expert).
  std::vector<std::vector<int32_t>> replicas_of_expert;
  // Per GPU: sum over its slots of the slot expert's load / replica_count.
  std::vector<double> gpu_loads;
};

// Balances one layer. expert_loads: one non-negative load per expert (any unit: selections,
// tokens per second). Precondition (checked): shape valid, expert_loads.size() == num_experts.
EplbLayout balance_experts(std::span<const double> expert_loads, const EplbShape& shape);

// Balances every layer (expert_loads[l] per layer) and returns one ExpertPlacement per layer on
// shape.num_gpus GPUs with gpus_per_node GPUs per node (the placement's node grouping, used by
// the token-to-replica rule; normally num_gpus / shape.num_nodes).
std::vector<ExpertPlacement> balance_placements(
    const std::vector<std::vector<double>>& expert_loads, const EplbShape& shape,
    int32_t gpus_per_node, int32_t num_shared_experts);

// Moving average of per-expert loads, per layer: exponential (avg += alpha * (x - avg), the
// first sample taken as is) or over the last window_samples samples (plain mean).
enum class LoadAverageKind { kExponential, kWindow };
// "exponential", "window".
const char* load_average_kind_name(LoadAverageKind kind);

class ExpertLoadAverage {
 public:
  // Preconditions (checked): num_layers, num_experts >= 1; ema_alpha in (0, 1] (exponential);
  // window_samples >= 1 (window).
  ExpertLoadAverage(int32_t num_layers, int32_t num_experts, LoadAverageKind kind, double ema_alpha,
                    int32_t window_samples);

  // One sample of a layer's per-expert loads (size num_experts).
  void add(int32_t layer_idx, std::span<const double> expert_loads);
  // The layer's current average per expert (zeros before the first sample).
  std::vector<double> average(int32_t layer_idx) const;
  int64_t num_samples(int32_t layer_idx) const { return num_samples_[layer_idx]; }
  int32_t num_layers() const { return static_cast<int32_t>(num_samples_.size()); }

 private:
  int32_t num_experts_;
  LoadAverageKind kind_;
  double ema_alpha_;
  int32_t window_samples_;
  std::vector<int64_t> num_samples_;
  // Exponential: layer x expert averages. Window: layer x window_samples x expert ring.
  std::vector<double> values_;
};

// [policies.eplb]:
//   redundant_slots = int >= 0   (default: num_gpus, one per GPU) extra physical slots in total;
//                                 experts + redundant_slots must be a multiple of the GPUs
//   variant = "auto" | "hierarchical" | "global"   (default "auto": hierarchical when the
//                                 groups divide evenly over the nodes)
//   average = "exponential" | "window"             (default "exponential")
//   ema_alpha = float in (0, 1]  (default 0.1) weight of the newest sample
//   window_samples = int >= 1    (default 32) samples of the window average
//   period_s = float > 0         (default 60) seconds between rebalances
struct EplbConfig {
  int32_t redundant_slots = 0;
  enum class Variant { kAuto, kHierarchical, kGlobal } variant = Variant::kAuto;
  LoadAverageKind average = LoadAverageKind::kExponential;
  double ema_alpha = 0.1;
  int32_t window_samples = 32;
  double period_s = 60.0;
};

// Parses [policies.eplb] for an EP group of num_gpus GPUs on num_nodes nodes serving num_experts
// experts in num_groups groups; calls finish(). Errors are ConfigErrors with key paths (an
// impossible slot count, "hierarchical" when the groups do not divide over the nodes).
EplbConfig parse_eplb_config(TomlTable& table, int32_t num_experts, int32_t num_groups,
                             int32_t num_nodes, int32_t num_gpus);

// The problem shape a config implies: num_physical_slots = num_experts + redundant_slots; the
// global variant is expressed as one group on one node.
EplbShape eplb_shape(const EplbConfig& config, int32_t num_experts, int32_t num_groups,
                     int32_t num_nodes, int32_t num_gpus);

// The policy: averages observed loads and produces balanced placements on demand.
class EplbBalancer {
 public:
  // Preconditions (checked): the config came from parse_eplb_config for these dimensions.
  EplbBalancer(const EplbConfig& config, int32_t num_layers, int32_t num_experts,
               int32_t num_groups, int32_t num_gpus, int32_t gpus_per_node,
               int32_t num_shared_experts);

  const EplbConfig& config() const { return config_; }
  const EplbShape& shape() const { return shape_; }
  // Adds one sample of a layer's per-expert loads to the moving average.
  void observe(int32_t layer_idx, std::span<const double> expert_loads);
  // Balanced placements of every layer from the current averages (uniform loads for a layer
  // without samples).
  std::vector<ExpertPlacement> rebalance() const;
  const ExpertLoadAverage& loads() const { return average_; }

 private:
  EplbConfig config_;
  EplbShape shape_;
  int32_t gpus_per_node_;
  int32_t num_shared_experts_;
  ExpertLoadAverage average_;
};

}  // namespace moesim::sim
