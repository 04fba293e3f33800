#include "sim/serving/cluster_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"

namespace moesim::sim::detail {

void ClusterPolicyActions::count_action(const std::string& name, int64_t n) {
  p_.recorder.on_action(name, n, p_.sim.now());
}

void ClusterPolicyActions::schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) {
  for (size_t i = 0; i < p_.policies.size(); ++i) {
    if (p_.policies[i].get() == policy) {
      p_.sim.schedule_after(delay_ns, p_.timer_kind, static_cast<int64_t>(i), tag);
      return;
    }
  }
  MOESIM_CHECK(false, "timer for an unknown policy");
}

int64_t ClusterPolicyActions::start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                                    std::vector<double> bytes) {
  Replica& r = p_.replicas[replica];
  MOESIM_CHECK(bytes.size() == r.gpus().size() * r.gpus().size(), "transfer matrix size");
  const int64_t id = next_transfer_id_++;
  r.transfers->push_back(BackgroundTransfer{id, std::move(bytes)});
  r.transfer_owner[id] = policy;
  count_action("weight_transfer_start");
  p_.wake(r);
  return id;
}

bool ClusterPolicyActions::settle_expert_memory(Replica& r) {
  const ModelCard& card = *p_.builder.scenario().model;
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  // One slot is one expert's weights in one MoE layer.
  const double slot_bytes = expert_weight_bytes(card, *moe);
  const double block_bytes = r.scheduler->layout().kv_block_bytes;
  const LayerPlacements& p = *r.placements();
  const int32_t num_ranks = r.scheduler->num_ranks();
  std::vector<int64_t> want(num_ranks, 0);
  for (int32_t g = 0; g < p.num_gpus(); ++g) {
    const int64_t extra = std::max<int64_t>(0, p.total_slots(g) - r.layout_total_slots);
    const auto blocks =
        static_cast<int64_t>(std::ceil(static_cast<double>(extra) * slot_bytes / block_bytes));
    want[g / r.tp()] = std::max(want[g / r.tp()], blocks);
  }
  for (int32_t k = 0; k < num_ranks; ++k) {
    const int64_t delta = want[k] - r.placement_extra_blocks[k];
    if (delta > 0 && !r.scheduler->kv(k).can_allocate(delta)) return false;
  }
  for (int32_t k = 0; k < num_ranks; ++k) {
    const int64_t delta = want[k] - r.placement_extra_blocks[k];
    if (delta < 0) r.scheduler->kv(k).release(-delta);
    if (delta > 0) MOESIM_CHECK(r.scheduler->kv(k).allocate(delta), "allocation after the check");
  }
  r.placement_extra_blocks = std::move(want);
  return true;
}

bool ClusterPolicyActions::add_expert_replica(int32_t replica, int32_t moe_layer_idx,
                                              int32_t expert, int32_t gpu_idx) {
  Replica& r = p_.replicas[replica];
  r.placements()->add_replica(moe_layer_idx, expert, gpu_idx);
  if (!settle_expert_memory(r)) {
    r.placements()->remove_replica(moe_layer_idx, expert, gpu_idx);
    return false;
  }
  ++r.placement_version;
  count_action("expert_replica_add");
  return true;
}

void ClusterPolicyActions::remove_expert_replica(int32_t replica, int32_t moe_layer_idx,
                                                 int32_t expert, int32_t gpu_idx) {
  Replica& r = p_.replicas[replica];
  r.placements()->remove_replica(moe_layer_idx, expert, gpu_idx);
  MOESIM_CHECK(settle_expert_memory(r), "freeing a slot needs no memory");
  ++r.placement_version;
  count_action("expert_replica_remove");
}

bool ClusterPolicyActions::set_layer_placements(
    int32_t replica, const std::vector<std::pair<int32_t, ExpertPlacement>>& layers) {
  Replica& r = p_.replicas[replica];
  MOESIM_CHECK(r.placements() != nullptr, "a placement to replace");
  LayerPlacements& p = *r.placements();
  std::vector<std::pair<int32_t, ExpertPlacement>> before;
  before.reserve(layers.size());
  for (const auto& [l, placement] : layers) {
    before.emplace_back(l, p.layer(l));
    p.set_layer(l, placement);  // checks the shape
  }
  if (!settle_expert_memory(r)) {
    for (auto it = before.rbegin(); it != before.rend(); ++it) p.set_layer(it->first, it->second);
    return false;
  }
  ++r.placement_version;
  count_action("expert_placement_set");
  return true;
}

void ClusterPolicyActions::replace_routed_experts(int32_t replica, const ModelCard& card,
                                                  const ExpertPlacement& placement,
                                                  RoutingModel* routing) {
  Replica& r = p_.replicas[replica];
  MOESIM_CHECK(r.step_idx == 0 && !r.busy && p_.router.outstanding(replica) == 0,
               "before the first step");
  p_.builder.rebuild(r, card, placement, routing, p_.setup);
  for (GpuId g : r.gpus()) ReplicaBuilder::fill_gpu_memory(r, p_.recorder.gpu(g.value));
  count_action("routed_experts_replaced");
}

}  // namespace moesim::sim::detail
