// ClusterSim's construction (event kinds, build: memory layout, replicas, KV caches, pools) and
// run(): the run loop, the conservation check and the assembly of the RunOutput; run_scenario.
#include "sim/serving/cluster.h"

#include <algorithm>
#include <string>
#include <utility>

#include "sim/calibration/cost_model_factory.h"
#include "sim/config/config_error.h"
#include "sim/core/check.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/serving/cluster_sim.h"
#ifdef MOESIM_HAVE_SIMGRID
#include "sim/network/simgrid/simgrid_model.h"
#endif

namespace moesim::sim {
namespace detail {

ClusterSim::ClusterSim(const Scenario& sc, const RunOptions& opt, uint64_t seed,
                       std::vector<std::unique_ptr<ServingPolicy>> policies)
    : sc_(sc),
      opt_(opt),
      sim_(seed),
      card_(*sc.model),
      topology_(make_network_topology(sc.cost, sc.topology)),
      topo_(*topology_),
      policies_(std::move(policies)) {
  k_arrival_ = sim_.register_kind("arrival", [this](const Event& e, Scheduler&) { on_arrival(e); });
  k_step_done_ =
      sim_.register_kind("step_done", [this](const Event& e, Scheduler&) { on_step_done(e); });
  k_transfer_ = sim_.register_kind("kv_transfer_done",
                                   [this](const Event& e, Scheduler&) { on_transfer_done(e); });
  k_end_ = sim_.register_kind("end_of_run", [this](const Event&, Scheduler&) { sim_.stop(); });
  k_timer_ = sim_.register_kind("policy_timer", [this](const Event& e, Scheduler&) {
    policies_[e.id0]->on_timer(*this, e.id1);
  });
  k_delayed_ = sim_.register_kind("delayed_admission", [this](const Event& e, Scheduler&) {
    auto it = delayed_.find(e.id0);
    MOESIM_CHECK(it != delayed_.end(), "unknown delayed admission");
    std::string pool = std::move(it->second);
    delayed_.erase(it);
    route_seq(static_cast<int32_t>(e.id0), pool);
  });
  build();
}

void ClusterSim::build() {
  const DeploymentSpec& d = sc_.deployment;
  GpuMemoryInputs mem;
  mem.hbm_bytes = topo_.gpu_spec().hbm_bytes;
  mem.attention_tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  mem.kv_block_tokens = sc_.scheduler.kv_block_tokens;
  mem.workspace_bytes = static_cast<int64_t>(sc_.scheduler.workspace_gib * (1LL << 30));
  mem.reserve_fraction = sc_.scheduler.hbm_reserve_fraction;
  const int64_t num_moe = num_moe_layers(card_);
  if (num_moe > 0) {
    RoutingShape shape = routing_shape_of(card_);
    const MoeSpec* moe = nullptr;
    for (const LayerSpec& l : card_.layers) {
      if (l.ffn.is_moe) {
        moe = &l.ffn.moe;
        break;
      }
    }
    std::string src = sc_.source_file + ": deployment";
    placement_ = std::make_unique<ExpertPlacement>(
        d.placement == PlacementLayout::kContiguous
            ? ExpertPlacement::contiguous(shape.num_experts, d.gpus_per_replica,
                                          std::min(d.gpus_per_replica, topo_.gpus_per_node()),
                                          static_cast<int32_t>(moe->num_shared_experts), src)
            : ExpertPlacement::strided(shape.num_experts, d.gpus_per_replica,
                                       std::min(d.gpus_per_replica, topo_.gpus_per_node()),
                                       static_cast<int32_t>(moe->num_shared_experts), src));
    auto primary = placement_->primary_gpu_of_expert();
    gpu_of_expert_.assign(primary.begin(), primary.end());
    mem.routed_expert_slots = placement_->max_slots_per_gpu() * num_moe;
  }
  mem_inputs_ = mem;
  std::string error;
  GpuMemoryLayout layout = compute_gpu_memory_layout(card_, mem, &error);
  if (!error.empty()) {
    throw ConfigError(sc_.source_file, 0, 0, "deployment",
                      card_.name + " on " + topo_.gpu_spec().name + " with " +
                          std::to_string(d.gpus_per_replica) + " GPUs per replica " + error);
  }
  cost_ = make_cost_model(sc_.cost, topo_.gpu_spec());
  NetworkModelRegistry registry;
#ifdef MOESIM_HAVE_SIMGRID
  register_simgrid_model(registry);
#endif
  const int32_t tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  for (int32_t ri = 0; ri < d.num_replicas; ++ri) {
    Replica r;
    r.idx = ri;
    for (int32_t g = 0; g < d.gpus_per_replica; ++g)
      r.gpus.emplace_back(ri * d.gpus_per_replica + g);
    r.layout = layout;
    r.max_seqs = sc_.scheduler.max_seqs;
    r.prefill_only = d.prefill_replicas > 0 && ri < d.prefill_replicas;
    r.decode_only = d.prefill_replicas > 0 && ri >= d.prefill_replicas;
    if (num_moe > 0) {
      r.routing = std::make_unique<SyntheticRoutingModel>(
          routing_shape_of(card_), sc_.routing,
          sim_.rng("routing.replica." + std::to_string(ri)).next_u64());
      r.network = registry.make(sc_.network_model, topo_);
    }
    if (placement_) {
      r.placement = std::make_unique<ExpertPlacement>(*placement_);
      r.layout_slots_per_gpu = placement_->max_slots_per_gpu();
    }
    r.step_model = std::make_unique<StepModel>(card_, topo_, d, r.gpus, r.placement.get(), *cost_,
                                               r.network.get(), r.routing.get());
    int32_t num_ranks = d.gpus_per_replica / tp;
    for (int32_t k = 0; k < num_ranks; ++k) {
      Rank rank;
      rank.kv = std::make_unique<KvCache>(layout.num_kv_blocks, sc_.scheduler.kv_block_tokens);
      r.ranks.push_back(std::move(rank));
    }
    r.placement_extra_blocks.assign(num_ranks, 0);
    for (GpuId g : r.gpus) {
      GpuRecord rec;
      rec.gpu = g.value;
      rec.replica = ri;
      rec.weight_bytes = layout.weight_bytes();
      rec.kv_pool_bytes = layout.kv_pool_bytes;
      rec.num_kv_blocks = layout.num_kv_blocks;
      rec.kv_block_bytes = layout.kv_block_bytes;
      gpu_records_.push_back(rec);
    }
    replicas_.push_back(std::move(r));
  }
  // Pointers into replicas_ are taken only now that the vector is complete.
  for (Replica& r : replicas_) {
    r.step_model->set_background(&r.transfers, sc_.scheduler.weight_transfer_chunk_mib * 1048576.0);
  }
  workload_ = std::make_unique<WorkloadGenerator>(sc_.workload, sim_.rng("workload"));
  if (d.pools.empty()) {
    pools_.push_back(Pool{"default", d.prefill_replicas, d.num_replicas});
  } else {
    int32_t next = 0;
    for (const PoolSpec& p : d.pools) {
      pools_.push_back(Pool{p.name, next, next + p.num_replicas});
      next += p.num_replicas;
    }
  }
  for (const auto& p : policies_) any_wants_loads_ = any_wants_loads_ || p->wants_expert_loads();
}

RunOutput ClusterSim::run() {
  SimTime end = from_seconds(sc_.run.duration_s);
  sim_.schedule_at(end, k_end_);
  for (auto& p : policies_) p->on_start(*this);
  // The recorded steps' placement at the start: every replica's GPUs (disjoint sets).
  std::vector<std::vector<int32_t>> initial_expert_gpus;
  if (placement_) {
    for (const Replica& r : replicas_) {
      recorded_placement_.push_back(expert_gpus_of(r));
      const auto& replica_gpus = recorded_placement_.back();
      initial_expert_gpus.resize(replica_gpus.size());
      for (size_t e = 0; e < replica_gpus.size(); ++e) {
        initial_expert_gpus[e].insert(initial_expert_gpus[e].end(), replica_gpus[e].begin(),
                                      replica_gpus[e].end());
      }
    }
  }
  schedule_next_open_loop();
  sim_.run(end);
  for (auto& p : policies_) p->on_finish(*this);
  RunOutput out;
  out.end_ns = sim_.now();
  // Conservation: every arrived request is completed, rejected or in flight, once.
  int64_t completed = 0, rejected = 0, in_flight = 0;
  for (size_t i = 0; i < records_.size(); ++i) {
    RequestRecord& rec = records_[i];
    if (rec.outcome == RequestOutcome::kInFlight) rec.generated_tokens = seqs_[i].generated;
    switch (rec.outcome) {
      case RequestOutcome::kCompleted:
        ++completed;
        break;
      case RequestOutcome::kRejected:
        ++rejected;
        break;
      case RequestOutcome::kInFlight:
        ++in_flight;
        break;
    }
  }
  // In flight = held by a replica (waiting, running or between prefill and decode pools) or
  // still waiting out a policy's admission delay (e.g. a session rebuild's summary).
  int64_t live = static_cast<int64_t>(delayed_.size());
  for (const Replica& r : replicas_) live += r.outstanding;
  out.conservation_ok = completed + rejected + in_flight == static_cast<int64_t>(records_.size()) &&
                        live == in_flight;
  out.conservation_message =
      "arrived " + std::to_string(records_.size()) + " = completed " + std::to_string(completed) +
      " + rejected " + std::to_string(rejected) + " + in flight " + std::to_string(in_flight) +
      (live == in_flight
           ? ""
           : " (MISMATCH: replicas and admission delays hold " + std::to_string(live) + ")");
  for (Replica& r : replicas_) {
    for (size_t k = 0; k < r.ranks.size(); ++k) {
      const int32_t tp = static_cast<int32_t>(r.gpus.size() / r.ranks.size());
      for (int32_t j = 0; j < tp; ++j) {
        GpuRecord& g = gpu_records_[r.gpus[k * tp + j].value];
        g.kv_high_water_blocks = r.ranks[k].kv->high_water_blocks();
      }
      counters_.kv_evictions += r.ranks[k].kv->num_evictions();
    }
  }
  counters_.cost_out_of_range_queries = cost_->num_out_of_range_queries();
  const WorkloadStats& ws = workload_->stats();
  if (ws.num_rollbacks > 0) counters_.actions["rollback"] = ws.num_rollbacks;
  out.requests = std::move(records_);
  out.gpus = std::move(gpu_records_);
  out.counters = counters_;
  out.summary =
      summarize(out.requests, out.gpus, out.counters, out.end_ns, sc_.slo.ttft_ms, sc_.slo.tpot_ms);
  out.digest = sim_.digest().value();
  out.digest_hex = sim_.digest().hex();
  out.num_events = sim_.num_events_executed();
  out.trace = std::move(trace_);
  out.steps = std::move(steps_);
  out.expert_gpus = std::move(initial_expert_gpus);
  out.placement_changes = std::move(placement_changes_);
  return out;
}

}  // namespace detail

RunOutput run_scenario(const Scenario& scenario, const RunOptions& options, int64_t seed_override,
                       std::vector<std::unique_ptr<ServingPolicy>> policies) {
  uint64_t seed = seed_override >= 0 ? static_cast<uint64_t>(seed_override) : scenario.run.seed;
  detail::ClusterSim sim(scenario, options, seed, std::move(policies));
  return sim.run();
}

}  // namespace moesim::sim
