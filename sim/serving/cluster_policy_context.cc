// ClusterSim's PolicyContext: what policies act through (action counters, timers, weight
// transfers, expert replicas and placements, replacing the routed experts).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/check.h"
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

int64_t ClusterSim::expert_slot_blocks(const Replica& r) const {
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card_.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  // One expert slot in every MoE layer: its weights take KV blocks away from the pool.
  const double bytes =
      expert_weight_bytes(card_, *moe) * static_cast<double>(num_moe_layers(card_));
  return static_cast<int64_t>(std::ceil(bytes / r.scheduler->layout().kv_block_bytes));
}

bool ClusterSim::add_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  const int64_t blocks = expert_slot_blocks(r);
  if (!r.scheduler->kv(gpu_idx / r.tp()).allocate(blocks)) return false;
  for (int32_t l = 0; l < r.placements()->num_layers(); ++l) {
    r.placements()->add_replica(l, expert, gpu_idx);
  }
  r.replica_slot_blocks[{expert, gpu_idx}] = blocks;
  count_action("expert_replica_add");
  return true;
}

void ClusterSim::remove_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  auto it = r.replica_slot_blocks.find({expert, gpu_idx});
  MOESIM_CHECK(it != r.replica_slot_blocks.end(), "removing a replica that was not added");
  for (int32_t l = 0; l < r.placements()->num_layers(); ++l) {
    r.placements()->remove_replica(l, expert, gpu_idx);
  }
  r.scheduler->kv(gpu_idx / r.tp()).release(it->second);
  r.replica_slot_blocks.erase(it);
  count_action("expert_replica_remove");
}

bool ClusterSim::set_expert_placement(int32_t replica, const ExpertPlacement& placement) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(r.placement() != nullptr, "a placement to replace");
  const ExpertPlacement& cur = *r.placement();
  MOESIM_CHECK(placement.num_experts() == cur.num_experts() &&
                   placement.num_gpus() == cur.num_gpus() &&
                   placement.gpus_per_node() == cur.gpus_per_node() &&
                   placement.num_shared_experts() == cur.num_shared_experts(),
               "a placement of the same shape");
  MOESIM_CHECK(r.replica_slot_blocks.empty(), "no replicas added by add_expert_replica");
  // A rank's KV pool pays for its fullest GPU's slots beyond the layout's.
  const int64_t slot_blocks = expert_slot_blocks(r);
  const int32_t num_ranks = r.scheduler->num_ranks();
  std::vector<int64_t> want(num_ranks, 0);
  for (int32_t g = 0; g < placement.num_gpus(); ++g) {
    const int64_t extra = std::max(0, placement.num_slots(g) - r.layout_slots_per_gpu);
    want[g / r.tp()] = std::max(want[g / r.tp()], extra * slot_blocks);
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
  r.placement_extra_blocks = want;
  r.placements()->set_all(placement);
  count_action("expert_placement_set");
  return true;
}

void ClusterSim::replace_routed_experts(int32_t replica, const ModelCard& card,
                                        const ExpertPlacement& placement, RoutingModel* routing) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(r.placement() != nullptr && routing != nullptr, "a replica with MoE layers");
  MOESIM_CHECK(r.step_idx == 0 && !r.busy && router_.outstanding(replica) == 0,
               "before the first step");
  MOESIM_CHECK(placement.num_gpus() == static_cast<int32_t>(r.gpus().size()), "the replica's GPUs");
  LayerPlacements placements(static_cast<int32_t>(num_moe_layers(card)), placement);
  const GpuMemoryLayout layout = builder_.memory_layout(
      card, &placements, "policies",
      card.name + " with replaced routed experts on replica " + std::to_string(replica));
  r.layout_slots_per_gpu = placement.max_slots_per_gpu();
  *r.parts.placements = std::move(placements);
  r.scheduler->reset_memory(layout);
  std::fill(r.placement_extra_blocks.begin(), r.placement_extra_blocks.end(), 0);
  r.parts.step_model =
      builder_.make_step_model(card, r.gpus(), r.placements(), r.parts.network.get(), routing);
  r.parts.step_model->set_background(&r.transfers,
                                     sc_.scheduler.weight_transfer_chunk_mib * 1048576.0);
  r.parts.step_model->set_report_expert_loads(any_wants_loads_);
  for (GpuId g : r.gpus()) {
    GpuRecord& rec = recorder_.gpu(g.value);
    rec.weight_bytes = layout.weight_bytes();
    rec.kv_pool_bytes = layout.kv_pool_bytes;
    rec.num_kv_blocks = layout.num_kv_blocks;
    rec.kv_block_bytes = layout.kv_block_bytes;
  }
  count_action("routed_experts_replaced");
}

}  // namespace moesim::sim::detail
