// ClusterSim's PolicyContext: what policies act through (action counters, timers, pools, weight
// transfers, expert replicas and placements, replacing the routed experts).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/core/check.h"
#include "sim/serving/cluster_sim.h"

namespace moesim::sim::detail {

void ClusterSim::count_action(const std::string& name, int64_t n) {
  counters_.actions[name] += n;
  if (trace_.size() < 100000) {
    trace_.push_back(TraceSlice{0, -1, "policy:" + name, -1, sim_.now(), 0});
  }
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

std::vector<std::string> ClusterSim::pool_names() const {
  std::vector<std::string> out;
  for (const Pool& p : pools_) out.push_back(p.name);
  return out;
}

int64_t ClusterSim::pool_outstanding(const std::string& pool) const {
  int64_t n = 0;
  for (const Pool& p : pools_) {
    if (p.name != pool) continue;
    for (int32_t i = p.first; i < p.last; ++i) n += replicas_[i].outstanding;
  }
  return n;
}

int64_t ClusterSim::start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                          std::vector<double> bytes) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(bytes.size() == r.gpus.size() * r.gpus.size(), "transfer matrix size");
  int64_t id = next_transfer_id_++;
  r.transfers.push_back(BackgroundTransfer{id, std::move(bytes)});
  r.transfer_owner[id] = policy;
  count_action("weight_transfer_start");
  try_start_step(r);
  return id;
}

bool ClusterSim::add_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  const int32_t tp = static_cast<int32_t>(r.gpus.size() / r.ranks.size());
  Rank& rank = r.ranks[gpu_idx / tp];
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card_.layers) {
    if (l.ffn.is_moe) {
      moe = &l.ffn.moe;
      break;
    }
  }
  // One expert slot in every MoE layer: its weights take KV blocks away from the pool.
  double bytes = expert_weight_bytes(card_, *moe) * static_cast<double>(num_moe_layers(card_));
  int64_t blocks = static_cast<int64_t>(std::ceil(bytes / r.layout.kv_block_bytes));
  if (!rank.kv->allocate(blocks)) return false;
  r.placement->add_replica(expert, gpu_idx);
  r.replica_slot_blocks[{expert, gpu_idx}] = blocks;
  count_action("expert_replica_add");
  return true;
}

void ClusterSim::remove_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) {
  Replica& r = replicas_[replica];
  const int32_t tp = static_cast<int32_t>(r.gpus.size() / r.ranks.size());
  auto it = r.replica_slot_blocks.find({expert, gpu_idx});
  MOESIM_CHECK(it != r.replica_slot_blocks.end(), "removing a replica that was not added");
  r.placement->remove_replica(expert, gpu_idx);
  r.ranks[gpu_idx / tp].kv->release(it->second);
  r.replica_slot_blocks.erase(it);
  count_action("expert_replica_remove");
}

bool ClusterSim::set_expert_placement(int32_t replica, const ExpertPlacement& placement) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(r.placement != nullptr, "a placement to replace");
  const ExpertPlacement& cur = *r.placement;
  MOESIM_CHECK(placement.num_experts() == cur.num_experts() &&
                   placement.num_gpus() == cur.num_gpus() &&
                   placement.gpus_per_node() == cur.gpus_per_node() &&
                   placement.num_shared_experts() == cur.num_shared_experts(),
               "a placement of the same shape");
  MOESIM_CHECK(r.replica_slot_blocks.empty(), "no replicas added by add_expert_replica");
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card_.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  // One slot holds the expert in every MoE layer; a rank's KV pool pays for its fullest GPU.
  const double slot_bytes =
      expert_weight_bytes(card_, *moe) * static_cast<double>(num_moe_layers(card_));
  const auto slot_blocks = static_cast<int64_t>(std::ceil(slot_bytes / r.layout.kv_block_bytes));
  const int32_t tp = static_cast<int32_t>(r.gpus.size() / r.ranks.size());
  std::vector<int64_t> want(r.ranks.size(), 0);
  for (int32_t g = 0; g < placement.num_gpus(); ++g) {
    const int64_t extra = std::max(0, placement.num_slots(g) - r.layout_slots_per_gpu);
    want[g / tp] = std::max(want[g / tp], extra * slot_blocks);
  }
  for (size_t k = 0; k < r.ranks.size(); ++k) {
    const int64_t delta = want[k] - r.placement_extra_blocks[k];
    if (delta > 0 && !r.ranks[k].kv->can_allocate(delta)) return false;
  }
  for (size_t k = 0; k < r.ranks.size(); ++k) {
    const int64_t delta = want[k] - r.placement_extra_blocks[k];
    if (delta < 0) r.ranks[k].kv->release(-delta);
    if (delta > 0) MOESIM_CHECK(r.ranks[k].kv->allocate(delta), "allocation after the check");
  }
  r.placement_extra_blocks = want;
  *r.placement = placement;
  count_action("expert_placement_set");
  return true;
}

void ClusterSim::replace_routed_experts(int32_t replica, const ModelCard& card,
                                        const ExpertPlacement& placement, RoutingModel* routing) {
  Replica& r = replicas_[replica];
  MOESIM_CHECK(r.placement != nullptr && routing != nullptr, "a replica with MoE layers");
  MOESIM_CHECK(r.step_idx == 0 && !r.busy && r.outstanding == 0, "before the first step");
  MOESIM_CHECK(placement.num_gpus() == static_cast<int32_t>(r.gpus.size()), "the replica's GPUs");
  GpuMemoryInputs mem = mem_inputs_;
  mem.routed_expert_slots =
      static_cast<int64_t>(placement.max_slots_per_gpu()) * num_moe_layers(card);
  std::string error;
  const GpuMemoryLayout layout = compute_gpu_memory_layout(card, mem, &error);
  if (!error.empty()) {
    throw ConfigError(sc_.source_file, 0, 0, "policies",
                      card.name + " with replaced routed experts on replica " +
                          std::to_string(replica) + " " + error);
  }
  r.layout = layout;
  r.layout_slots_per_gpu = placement.max_slots_per_gpu();
  *r.placement = placement;
  if (replica == 0) *placement_ = placement;
  for (Rank& rank : r.ranks) {
    rank.kv = std::make_unique<KvCache>(layout.num_kv_blocks, sc_.scheduler.kv_block_tokens);
  }
  std::fill(r.placement_extra_blocks.begin(), r.placement_extra_blocks.end(), 0);
  r.step_model = std::make_unique<StepModel>(card, topo_, sc_.deployment, r.gpus, r.placement.get(),
                                             *cost_, r.network.get(), routing);
  r.step_model->set_background(&r.transfers, sc_.scheduler.weight_transfer_chunk_mib * 1048576.0);
  for (GpuId g : r.gpus) {
    GpuRecord& rec = gpu_records_[g.value];
    rec.weight_bytes = layout.weight_bytes();
    rec.kv_pool_bytes = layout.kv_pool_bytes;
    rec.num_kv_blocks = layout.num_kv_blocks;
    rec.kv_block_bytes = layout.kv_block_bytes;
  }
  count_action("routed_experts_replaced");
}

}  // namespace moesim::sim::detail
