#include "sim/placement/layer_placements.h"

#include <algorithm>

#include "base/check.h"
#include "sim/core/state_version.h"

namespace moesim::sim {

LayerPlacements::LayerPlacements(int32_t num_moe_layers, const ExpertPlacement& placement)
    : layers_(static_cast<size_t>(std::max(num_moe_layers, 1)),
              std::make_shared<ExpertPlacement>(placement)) {
  MOESIM_CHECK(num_moe_layers >= 1, "a placement for at least one MoE layer");
  versions_.assign(layers_.size(), next_state_version());  // equal layers share a version
}

void LayerPlacements::check_shape(const ExpertPlacement& p) const {
  const ExpertPlacement& cur = *layers_.front();
  MOESIM_CHECK(p.num_experts() == cur.num_experts() && p.num_gpus() == cur.num_gpus() &&
                   p.gpus_per_node() == cur.gpus_per_node() &&
                   p.num_shared_experts() == cur.num_shared_experts(),
               "a placement of the same shape in every layer");
}

void LayerPlacements::set_layer(int32_t moe_layer_idx, const ExpertPlacement& placement) {
  check_shape(placement);
  layers_[moe_layer_idx] = std::make_shared<ExpertPlacement>(placement);
  versions_[moe_layer_idx] = next_state_version();
}

void LayerPlacements::set_all(const ExpertPlacement& placement) {
  check_shape(placement);
  std::fill(layers_.begin(), layers_.end(), std::make_shared<ExpertPlacement>(placement));
  std::fill(versions_.begin(), versions_.end(), next_state_version());
}

void LayerPlacements::add_replica(int32_t moe_layer_idx, int32_t expert_idx, int32_t gpu_idx) {
  own_layer(moe_layer_idx).add_replica(expert_idx, gpu_idx);
  versions_[moe_layer_idx] = next_state_version();
}

void LayerPlacements::remove_replica(int32_t moe_layer_idx, int32_t expert_idx, int32_t gpu_idx) {
  own_layer(moe_layer_idx).remove_replica(expert_idx, gpu_idx);
  versions_[moe_layer_idx] = next_state_version();
}

ExpertPlacement& LayerPlacements::own_layer(int32_t moe_layer_idx) {
  std::shared_ptr<ExpertPlacement>& p = layers_[moe_layer_idx];
  if (p.use_count() > 1) p = std::make_shared<ExpertPlacement>(*p);
  return *p;
}

int64_t LayerPlacements::total_slots(int32_t gpu_idx) const {
  int64_t n = 0;
  for (const auto& p : layers_) n += p->num_slots(gpu_idx);
  return n;
}

int64_t LayerPlacements::max_total_slots_per_gpu() const {
  int64_t best = 0;
  for (int32_t g = 0; g < num_gpus(); ++g) best = std::max(best, total_slots(g));
  return best;
}

bool LayerPlacements::uniform() const {
  for (const auto& layer : layers_) {
    if (layer == layers_.front()) continue;  // shared: equal
    const ExpertPlacement& p = *layer;
    for (int32_t e = 0; e < p.num_experts(); ++e) {
      const auto a = p.replicas(e);
      const auto b = layers_.front()->replicas(e);
      if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) return false;
    }
  }
  return true;
}

}  // namespace moesim::sim
