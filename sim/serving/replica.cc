#include "sim/serving/replica.h"

namespace moesim::sim {

ExpertGpus Replica::expert_gpus(int32_t moe_layer_idx) const {
  const ExpertPlacement& p = parts.placements->layer(moe_layer_idx);
  ExpertGpus out(static_cast<size_t>(p.num_experts()));
  for (int32_t e = 0; e < p.num_experts(); ++e) {
    for (int32_t g : p.replicas(e)) out[e].push_back(parts.gpus[g].value);
  }
  return out;
}

}  // namespace moesim::sim
