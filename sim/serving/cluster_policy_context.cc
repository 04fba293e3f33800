// ClusterSim's PolicyContext: what policies act through (action counters, timers, weight
// transfers, expert replicas and placements, replacing the routed experts).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "sim/serving/cluster_sim.h"

namespace moesim::sim::detail {

void ClusterSim::count_action(const std::string& name, int64_t n) {
  recorder_.on_action(name, n, sim_.now());
}

void ClusterSim::schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) {
  for (size_t i = 0; i < policies_.size(); ++i) {
    if (policies_[i].get() == policy) {
      sim_.schedule_after(delay_ns, k_timer_, static_cast<int64_t>(i), tag);
      return;
    }
  }
  MOESIM_CHECK(false, "timer for an unknown policy");
}

int64_t ClusterSim::start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                          std::vector<double> bytes) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(bytes.size() == r.gpus().size() * r.gpus().size(), "transfer matrix size");
  const int64_t id = next_transfer_id_++;
  r.transfers.push_back(BackgroundTransfer{id, std::move(bytes)});
  r.transfer_owner[id] = policy;
  count_action("weight_transfer_start");
  try_start_step(r);
  return id;
}

bool ClusterSim::settle_expert_memory(Replica& r) {
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card_.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  // One slot is one expert's weights in one MoE layer.
  const double slot_bytes = expert_weight_bytes(card_, *moe);
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

bool ClusterSim::add_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                                    int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  r.placements()->add_replica(moe_layer_idx, expert, gpu_idx);
  if (!settle_expert_memory(r)) {
    r.placements()->remove_replica(moe_layer_idx, expert, gpu_idx);
    return false;
  }
  ++r.placement_version;
  count_action("expert_replica_add");
  return true;
}

void ClusterSim::remove_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                                       int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  r.placements()->remove_replica(moe_layer_idx, expert, gpu_idx);
  MOESIM_CHECK(settle_expert_memory(r), "freeing a slot needs no memory");
  ++r.placement_version;
  count_action("expert_replica_remove");
}

bool ClusterSim::set_layer_placements(
    int32_t replica, const std::vector<std::pair<int32_t, ExpertPlacement>>& layers) {
  Replica& r = replicas_[replica];
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

void ClusterSim::replace_routed_experts(int32_t replica, const ModelCard& card,
                                        const ExpertPlacement& placement, RoutingModel* routing) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(r.placements() != nullptr && routing != nullptr, "a replica with MoE layers");
  MOESIM_CHECK(r.step_idx == 0 && !r.busy && router_.outstanding(replica) == 0,
               "before the first step");
  MOESIM_CHECK(placement.num_gpus() == static_cast<int32_t>(r.gpus().size()), "the replica's GPUs");
  LayerPlacements placements(static_cast<int32_t>(num_moe_layers(card)), placement);
  const GpuMemoryLayout layout = builder_.memory_layout(
      card, &placements, "policies",
      card.name + " with replaced routed experts on replica " + std::to_string(replica));
  r.layout_total_slots = placements.max_total_slots_per_gpu();
  *r.parts.placements = std::move(placements);
  r.scheduler->reset_memory(layout);
  ++r.placement_version;
  std::fill(r.placement_extra_blocks.begin(), r.placement_extra_blocks.end(), 0);
  r.parts.step_model =
      builder_.make_step_model(card, r.gpus(), r.placements(), r.parts.network.get(), routing);
  r.parts.step_model->set_background(&r.transfers,
                                     sc_.scheduler.weight_transfer_chunk_mib * 1048576.0);
  r.parts.step_model->set_report_expert_loads(any_wants_loads_);
  r.parts.step_model->set_track_nic_bytes(kv_tiers_ != nullptr);
  if (sc_.speculative.enabled) {
    r.parts.step_model->set_draft_tokens(sc_.speculative.num_draft_tokens);
    r.parts.step_model->set_draft_model(sc_.speculative.draft_model.get());
    r.parts.step_model->set_draft_gpus(r.draft_gpus);
  }
  if (r.shadow.step_model) {
    r.shadow.step_model =
        builder_.make_step_model(card, r.gpus(), r.placements(), r.shadow.network.get(), routing);
    r.shadow.step_model->set_fast_tier(sc_.run.tier != SimTier::kFast);
    if (sc_.speculative.enabled) {
      r.shadow.step_model->set_draft_tokens(sc_.speculative.num_draft_tokens);
      r.shadow.step_model->set_draft_model(sc_.speculative.draft_model.get());
      r.shadow.step_model->set_draft_gpus(r.draft_gpus);
    }
  }
  for (GpuId g : r.gpus()) {
    GpuRecord& rec = recorder_.gpu(g.value);
    rec.weight_bytes = layout.weight_bytes();
    rec.routed_expert_slots = r.layout_total_slots;
    rec.routed_expert_weight_bytes = layout.routed_expert_weight_bytes;
    rec.kv_pool_bytes = layout.kv_pool_bytes;
    rec.num_kv_blocks = layout.num_kv_blocks;
    rec.kv_block_bytes = layout.kv_block_bytes;
  }
  count_action("routed_experts_replaced");
}

}  // namespace moesim::sim::detail
