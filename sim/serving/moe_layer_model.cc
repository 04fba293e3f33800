#include "sim/serving/moe_layer_model.h"

namespace moesim::sim {

void fill_layer_node_limit(const MoeLayerDeps& deps, const MoeLayerCall& call,
                           std::vector<int32_t>& scratch, NodeLimit& out) {
  const MoeSpec& m = *call.moe;
  fill_node_limit(deps.topology, deps.gpus,
                  deps.placements.layer(call.moe_idx).primary_gpu_of_expert(),
                  static_cast<int32_t>(m.num_expert_groups), static_cast<int32_t>(m.topk_groups),
                  static_cast<int32_t>(m.top_k), scratch, out);
}

}  // namespace moesim::sim
