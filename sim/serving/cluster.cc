// ClusterSim's construction (event kinds, replicas, schedulers, GPU records) and run(): the run
// loop, the conservation check and the assembly of the RunOutput; run_scenario.
#include "sim/serving/cluster.h"

#include <string>
#include <utility>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/core/horizon.h"
#include "sim/serving/cluster_sim.h"

namespace moesim::sim {
namespace detail {

ExpertGpus Replica::expert_gpus(int32_t moe_layer_idx) const {
  const ExpertPlacement& p = parts.placements->layer(moe_layer_idx);
  ExpertGpus out(static_cast<size_t>(p.num_experts()));
  for (int32_t e = 0; e < p.num_experts(); ++e) {
    for (int32_t g : p.replicas(e)) out[e].push_back(parts.gpus[g].value);
  }
  return out;
}

ClusterSim::ClusterSim(const Scenario& sc, const RunOptions& opt, uint64_t seed,
                       std::vector<std::unique_ptr<ServingPolicy>> policies)
    : sc_(sc),
      opt_(opt),
      sim_(seed),
      card_(*sc.model),
      builder_(sc),
      policies_(std::move(policies)),
      router_(sc.deployment, sc.scheduler.router),
      recorder_(opt),
      stats_(sc.slo.ttft_ms, sc.slo.tpot_ms) {
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
  // Registered only with tiers: a scenario without them keeps its event kinds (and digest).
  if (sc_.kv_tiers.enabled) {
    k_kv_load_ = sim_.register_kind("kv_load_ready",
                                    [this](const Event& e, Scheduler&) { on_kv_load_ready(e); });
  }
  for (const auto& p : policies_) any_wants_loads_ = any_wants_loads_ || p->wants_expert_loads();
  if (sc_.speculative.enabled) {
    draft_acceptance_ =
        std::make_unique<DraftAcceptance>(sc_.speculative, &sim_.rng("speculative.accept"));
  }
  build_replicas();
  if (sc_.scheduler.router == RouterPolicy::kCacheAware) {
    router_.set_cache_probe([this](int32_t ri, const Request& req) {
      const ReplicaScheduler& sched = *replicas_[ri].scheduler;
      return ClusterRouter::CacheView{sched.cached_prefix_blocks(req) * kPrefixBlockTokens,
                                      sched.pending_prefill_tokens()};
    });
  }
  workload_ = std::make_unique<WorkloadGenerator>(sc_.workload, sim_.rng("workload"));
  if (opt_.stop_on_certain_failure) start_slo_watch();
}

void ClusterSim::start_slo_watch() {
  if (sc_.workload.kind == WorkloadKind::kAgent) return;  // later turns depend on the run
  // The open-loop sequence does not depend on the serving layer (workload_generator.h): a second
  // generator on a copy of the stream sees the same arrivals.
  const SimTime end = checked_duration_ns(sc_.run.duration_s, "the run (run.duration_s)");
  RngStream rng(sim_.root_seed(), "workload");
  WorkloadGenerator gen(sc_.workload, rng);
  int64_t max_requests = 0;
  while (std::optional<Request> r = gen.next()) {
    if (r->arrival_ns > end) break;
    ++max_requests;
  }
  slo_watch_ = std::make_unique<SloWatch>(*opt_.stop_on_certain_failure, max_requests);
}

void ClusterSim::build_replicas() {
  const DeploymentSpec& d = sc_.deployment;
  const int32_t tp = d.attention == AttentionParallel::kTensor ? d.attention_tp : 1;
  const Topology& topo = builder_.topology();
  if (sc_.kv_tiers.enabled) {
    kv_tiers_ = std::make_unique<KvTiers>(sc_.kv_tiers, topo.num_nodes(), topo.num_gpus());
  }
  GpuMemoryLayout layout;
  for (int32_t ri = 0; ri < d.num_replicas; ++ri) {
    Replica r;
    r.idx = ri;
    r.parts = builder_.build(ri, sim_.root_seed());
    if (opt_.tier_check_every > 0 && r.placements()) {
      // Synthetic routing depends on (seed, layer, step, tokens) only: the shadow shares it.
      r.shadow.network = builder_.make_network();
      r.shadow.step_model = builder_.make_step_model(card_, r.gpus(), r.placements(),
                                                     r.shadow.network.get(), r.parts.routing.get());
      r.shadow.step_model->set_fast_tier(sc_.run.tier != SimTier::kFast);
    }
    // Every replica holds the same slots per GPU (a static layout, or EPLB filling every GPU's
    // slots evenly in every layer): the first replica's layout is every replica's.
    if (ri == 0) {
      layout = builder_.memory_layout(card_, r.placements(), "deployment",
                                      card_.name + " on " + builder_.topology().gpu_spec().name +
                                          " with " + std::to_string(d.gpus_per_replica) +
                                          " GPUs per replica");
      builder_.cap_kv_pool_for_draft_gpus(layout, d.gpus_per_replica / tp);
    }
    r.scheduler =
        std::make_unique<ReplicaScheduler>(sc_.scheduler, d.gpus_per_replica / tp, layout, &seqs_);
    if (sc_.speculative.enabled) {
      const int32_t k = sc_.speculative.num_draft_tokens;
      r.scheduler->set_draft_tokens(k);
      const ModelCard* draft = sc_.speculative.draft_model.get();  // null: MTP
      r.parts.step_model->set_draft_tokens(k);
      r.parts.step_model->set_draft_model(draft);
      r.draft_gpus = builder_.draft_gpus(ri);
      r.parts.step_model->set_draft_gpus(r.draft_gpus);
      if (r.shadow.step_model) {
        r.shadow.step_model->set_draft_tokens(k);
        r.shadow.step_model->set_draft_model(draft);
        r.shadow.step_model->set_draft_gpus(r.draft_gpus);
      }
    }
    if (kv_tiers_) {
      std::vector<int32_t> nodes, gpus;
      for (int32_t k = 0; k < r.scheduler->num_ranks(); ++k) {
        const GpuId first = r.gpus()[k * tp];
        nodes.push_back(topo.node_of(first).value);
        gpus.push_back(first.value);
      }
      r.scheduler->set_kv_tiers(kv_tiers_.get(), std::move(nodes), std::move(gpus), tp);
      r.parts.step_model->set_track_nic_bytes(true);
    }
    r.prefill_only = d.prefill_replicas > 0 && ri < d.prefill_replicas;
    r.decode_only = d.prefill_replicas > 0 && ri >= d.prefill_replicas;
    if (r.placements()) r.layout_total_slots = r.placements()->max_total_slots_per_gpu();
    r.placement_extra_blocks.assign(r.scheduler->num_ranks(), 0);
    for (GpuId g : r.gpus()) {
      GpuRecord rec;
      rec.gpu = g.value;
      rec.replica = ri;
      rec.weight_bytes = layout.weight_bytes();
      rec.routed_expert_slots = r.layout_total_slots;
      rec.num_moe_layers = r.placements() ? r.placements()->num_layers() : 0;
      rec.routed_expert_weight_bytes = layout.routed_expert_weight_bytes;
      rec.kv_pool_bytes = layout.kv_pool_bytes;
      rec.num_kv_blocks = layout.num_kv_blocks;
      rec.kv_block_bytes = layout.kv_block_bytes;
      recorder_.add_gpu(rec);
    }
    replicas_.push_back(std::move(r));
  }
  // Draft GPUs of their own (SpeculativeSpec::draft_gpus) follow every replica's GPUs, in id order:
  // each holds the whole draft model (its draft KV is what caps the replicas' KV pools).
  for (int32_t ri = 0; ri < d.num_replicas && sc_.speculative.draft_gpus > 0; ++ri) {
    for (GpuId g : builder_.draft_gpus(ri)) {
      GpuRecord rec;
      rec.gpu = g.value;
      rec.replica = ri;
      rec.weight_bytes = draft_model_memory(*sc_.speculative.draft_model).weight_bytes;
      recorder_.add_gpu(rec);
    }
  }
  // Pointers into replicas_ are taken only now that the vector is complete.
  for (Replica& r : replicas_) {
    r.parts.step_model->set_background(&r.transfers,
                                       sc_.scheduler.weight_transfer_chunk_mib * 1048576.0);
    r.parts.step_model->set_report_expert_loads(any_wants_loads_);
  }
  if (d.prefill_replicas > 0) transfer_network_ = builder_.make_network();
}

RunOutput ClusterSim::run() {
  const SimTime end = checked_duration_ns(sc_.run.duration_s, "the run (run.duration_s)");
  sim_.schedule_at(end, k_end_);
  for (auto& p : policies_) p->on_start(*this);
  // The placement at the start (what recorded steps start from): every replica's GPUs (disjoint
  // sets), MoE layer 0's; layers laid out otherwise are placement changes of the first step.
  for (const Replica& r : replicas_) {
    if (r.placements()) {
      recorder_.set_initial_placement(r.idx, r.expert_gpus(0), r.placements()->num_layers());
    }
  }
  schedule_next_open_loop();
  sim_.run(end);
  for (auto& p : policies_) p->on_finish(*this);
  RunOutput out;
  if (slo_watch_ && slo_watch_->failed()) out.stopped_early = slo_watch_->failure();
  out.cancelled = cancelled_;
  out.end_ns = sim_.now();
  check_conservation(out);
  RunCounters& counters = recorder_.counters();
  for (Replica& r : replicas_) {
    const ReplicaScheduler& sched = *r.scheduler;
    for (int32_t k = 0; k < sched.num_ranks(); ++k) {
      for (int32_t j = 0; j < r.tp(); ++j) {
        recorder_.gpu(r.gpus()[k * r.tp() + j].value).kv_high_water_blocks =
            sched.kv(k).high_water_blocks();
      }
      counters.kv_evictions += sched.kv(k).num_evictions();
    }
    counters.prompt_tokens_total += sched.totals().prompt_tokens_total;
    counters.prompt_tokens_cached += sched.totals().prompt_tokens_cached;
    counters.num_preemptions += sched.totals().num_preemptions;
    if (sched.totals().num_preemptions > 0) {
      counters.actions["preempt"] += sched.totals().num_preemptions;
    }
  }
  counters.cost_out_of_range_queries = builder_.cost().num_out_of_range_queries();
  if (kv_tiers_) counters.kv_tiers = kv_tiers_->final_counters();
  const WorkloadStats& ws = workload_->stats();
  if (ws.num_rollbacks > 0) counters.actions["rollback"] = ws.num_rollbacks;
  out.requests = std::move(kept_);
  out.gpus = std::move(recorder_.gpus());
  out.counters = counters;
  out.summary = summarize(stats_, out.gpus, out.counters, out.end_ns);
  out.digest = sim_.digest().value();
  out.digest_hex = sim_.digest().hex();
  out.num_events = sim_.num_events_executed();
  out.trace = std::move(recorder_.trace_slices());
  out.steps = std::move(recorder_.steps());
  out.step_series = std::move(recorder_.step_series());
  out.expert_gpus = recorder_.initial_expert_gpus();
  out.placement_changes = std::move(recorder_.placement_changes());
  out.tier_checked = opt_.tier_check_every > 0;
  out.tier_samples = std::move(tier_samples_);
  out.tier_samples_skipped = tier_samples_skipped_;
  if (draft_acceptance_) out.speculative = draft_acceptance_->totals();
  return out;
}

void ClusterSim::retire_finished(bool all) {
  const SimTime end_ns =
      all ? sim_.now() : checked_duration_ns(sc_.run.duration_s, "the run (run.duration_s)");
  while (!records_.empty() && (all || records_.front().outcome != RequestOutcome::kInFlight)) {
    const RequestRecord& rec = records_.front();
    stats_.add(rec, end_ns);
    for (RequestSink* sink : opt_.request_sinks) sink->add(rec, end_ns);
    if (opt_.keep_requests) kept_.push_back(rec);
    records_.pop_front();
    seqs_.pop_front();
  }
}

void ClusterSim::check_conservation(RunOutput& out) {
  // Every arrived request is completed, rejected or in flight, once: the records still in the
  // window are retired now, in flight ones with what they generated so far.
  for (int64_t i = records_.front_id(); i < records_.size(); ++i) {
    sync_record(static_cast<int32_t>(i));
    RequestRecord& rec = records_[i];
    if (rec.outcome == RequestOutcome::kInFlight) rec.generated_tokens = seqs_[i].generated;
  }
  retire_finished(/*all=*/true);
  const int64_t completed = stats_.num_completed(), rejected = stats_.num_rejected(),
                in_flight = stats_.num_in_flight(), arrived = records_.size();
  // In flight = held by a replica (waiting, running or between prefill and decode pools) or
  // still waiting out a policy's admission delay (e.g. a session rebuild's summary).
  const int64_t live = static_cast<int64_t>(delayed_.size()) + router_.total_outstanding();
  out.conservation_ok = completed + rejected + in_flight == arrived &&
                        stats_.num_arrived() == arrived && live == in_flight;
  out.conservation_message =
      "arrived " + std::to_string(arrived) + " = completed " + std::to_string(completed) +
      " + rejected " + std::to_string(rejected) + " + in flight " + std::to_string(in_flight) +
      (live == in_flight
           ? ""
           : " (MISMATCH: replicas and admission delays hold " + std::to_string(live) + ")");
}

}  // namespace detail

RunOutput run_scenario(const Scenario& scenario, const RunOptions& options, int64_t seed_override,
                       std::vector<std::unique_ptr<ServingPolicy>> policies) {
  const uint64_t seed =
      seed_override >= 0 ? static_cast<uint64_t>(seed_override) : scenario.run.seed;
  detail::ClusterSim sim(scenario, options, seed, std::move(policies));
  return sim.run();
}

}  // namespace moesim::sim
