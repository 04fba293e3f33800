#include "sim/policy/expert_pruning_deployment.h"

#include <utility>
#include <vector>

#include "base/check.h"

namespace moesim::sim {

ModelCard pruned_model_card(const ModelCard& card, int32_t num_kept) {
  ModelCard out = card;
  for (LayerSpec& l : out.layers) {
    if (!l.ffn.is_moe) continue;
    MOESIM_CHECK(num_kept >= l.ffn.moe.top_k && num_kept <= l.ffn.moe.num_routed_experts,
                 "kept experts in [top_k, experts]");
    l.ffn.moe.num_routed_experts = num_kept;
    l.ffn.moe.num_expert_groups = 1;
    l.ffn.moe.topk_groups = 1;
  }
  return out;
}

ExpertPlacement repacked_placement(int32_t num_kept, int32_t num_gpus, int32_t gpus_per_node,
                                   int32_t num_shared_experts) {
  std::vector<std::vector<int32_t>> replicas(num_kept);
  for (int32_t i = 0; i < num_kept; ++i) {
    replicas[i] = {static_cast<int32_t>(static_cast<int64_t>(i) * num_gpus / num_kept)};
  }
  return ExpertPlacement(num_kept, num_gpus, gpus_per_node, num_shared_experts, std::move(replicas),
                         "pruned placement");
}

}  // namespace moesim::sim
