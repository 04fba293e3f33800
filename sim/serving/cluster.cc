// ClusterSim's construction (event kinds, replicas, GPU records, the policies' context, the step
// watchers) and run(): the run loop, the conservation check and the assembly of the RunOutput;
// run_scenario.
#include "sim/serving/cluster.h"

#include <string>
#include <utility>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/core/horizon.h"
#include "sim/serving/cluster_sim.h"

namespace moesim::sim {
namespace detail {

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
  register_events();
  for (const auto& p : policies_) any_wants_loads_ = any_wants_loads_ || p->wants_expert_loads();
  if (sc_.speculative.enabled) {
    draft_acceptance_ =
        std::make_unique<DraftAcceptance>(sc_.speculative, &sim_.rng("speculative.accept"));
    draft_accounting_ = std::make_unique<DraftAccounting>(*draft_acceptance_, recorder_);
  }
  const Topology& topo = builder_.topology();
  if (sc_.kv_tiers.enabled) {
    kv_tiers_ = std::make_unique<KvTiers>(sc_.kv_tiers, topo.num_nodes(), topo.num_gpus());
    kv_traffic_ = std::make_unique<KvTierTraffic>(*kv_tiers_, sim_, k_kv_load_, recorder_, seqs_,
                                                  sc_.outputs.trace_replicas);
  }
  setup_.root_seed = sim_.root_seed();
  setup_.report_expert_loads = any_wants_loads_;
  setup_.check_fidelity = opt_.fidelity_check_every > 0;
  setup_.kv_tiers = kv_tiers_.get();
  setup_.seqs = &seqs_;
  replicas_ = builder_.build_replicas(setup_);
  for (const GpuRecord& rec : builder_.gpu_records(replicas_)) recorder_.add_gpu(rec);
  if (sc_.deployment.prefill_replicas > 0) {
    pd_transfer_ = std::make_unique<PdTransfer>(builder_.make_network());
  }
  if (opt_.fidelity_check_every > 0)
    fidelity_checker_ = std::make_unique<FidelityChecker>(opt_.fidelity_check_every);
  recording_ = std::make_unique<StepRecording>(recorder_, sim_, seqs_, sc_.outputs.trace_replicas);
  policy_parts_.reset(new ClusterPolicyParts{sim_, recorder_, router_, replicas_, builder_, setup_,
                                             policies_, k_timer_,
                                             [this](Replica& r) { try_start_step(r); }});
  policy_view_ = std::make_unique<ClusterPolicyView>(*policy_parts_);
  policy_actions_ = std::make_unique<ClusterPolicyActions>(*policy_parts_);
  policy_ctx_.emplace(PolicyContext{*policy_view_, *policy_actions_});
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

void ClusterSim::register_events() {
  k_arrival_ = sim_.register_kind("arrival", [this](const Event& e, Scheduler&) { on_arrival(e); });
  k_step_done_ =
      sim_.register_kind("step_done", [this](const Event& e, Scheduler&) { on_step_done(e); });
  k_transfer_ = sim_.register_kind("kv_transfer_done",
                                   [this](const Event& e, Scheduler&) { on_transfer_done(e); });
  k_end_ = sim_.register_kind("end_of_run", [this](const Event&, Scheduler&) { sim_.stop(); });
  k_timer_ = sim_.register_kind("policy_timer", [this](const Event& e, Scheduler&) {
    policies_[e.id0]->on_timer(*policy_ctx_, e.id1);
  });
  k_delayed_ = sim_.register_kind("delayed_admission", [this](const Event& e, Scheduler&) {
    auto it = delayed_.find(e.id0);
    MOESIM_CHECK(it != delayed_.end(), "unknown delayed admission");
    std::string pool = std::move(it->second);
    delayed_.erase(it);
    route_seq(static_cast<int32_t>(e.id0), pool);
  });
  // Registered only with KV tiers: a scenario without them keeps its event kinds (and digest).
  if (sc_.kv_tiers.enabled) {
    k_kv_load_ = sim_.register_kind("kv_load_ready", [this](const Event& e, Scheduler&) {
      Replica& r = replicas_[static_cast<size_t>(e.id0)];
      if (kv_traffic_->on_load_ready(e, r)) try_start_step(r);
    });
  }
}

void ClusterSim::start_slo_watch() {
  if (sc_.workload.kind == WorkloadKind::kAgent) return;  // later turns depend on the run
  const SimTime end = checked_duration_ns(sc_.run.duration_s, "the run (run.duration_s)");
  slo_watch_ = std::make_unique<SloWatch>(
      *opt_.stop_on_certain_failure,
      count_open_loop_arrivals(sc_.workload, sim_.root_seed(), "workload", end));
}

RunOutput ClusterSim::run() {
  const SimTime end = checked_duration_ns(sc_.run.duration_s, "the run (run.duration_s)");
  sim_.schedule_at(end, k_end_);
  for (auto& p : policies_) p->on_start(*policy_ctx_);
  // The placement at the start (what recorded steps start from): every replica's GPUs (disjoint
  // sets), MoE layer 0's; layers laid out otherwise are placement changes of the first step.
  for (const Replica& r : replicas_) {
    if (r.placements()) {
      recorder_.set_initial_placement(r.idx, r.expert_gpus(0), r.placements()->num_layers());
    }
  }
  schedule_next_open_loop();
  sim_.run(end);
  for (auto& p : policies_) p->on_finish(*policy_ctx_);
  RunOutput out;
  if (slo_watch_ && slo_watch_->failed()) out.stopped_early = slo_watch_->failure();
  out.cancelled = cancelled_;
  out.end_ns = sim_.now();
  check_conservation(out);
  RunCounters& counters = recorder_.counters();
  for (const Replica& r : replicas_) add_replica_totals(r, recorder_);
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
  out.fidelity_checked = fidelity_checker_ != nullptr;
  if (fidelity_checker_) {
    out.fidelity_samples = std::move(fidelity_checker_->samples());
    out.fidelity_samples_skipped = fidelity_checker_->skipped();
  }
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
    sync_record(seqs_[i], records_[i]);
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
