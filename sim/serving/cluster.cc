// ClusterSim's construction (event kinds, replicas, GPU records, the policies' context, the step
// watchers) and run(): the run loop, the conservation check and the assembly of the RunOutput;
// run_scenario.
#include "sim/serving/cluster.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/core/horizon.h"
#include "sim/metrics/figure_text.h"
#include "sim/serving/cluster_sim.h"

namespace moesim::sim {
namespace detail {
namespace {

// The cost model's query counts: totals and, per op kind, the nonzero ones.
void set_cost_query_counters(const CostModel& cost, RunCounters& c) {
  const CostQueryCounts q = cost.query_counts();
  for (int k = 0; k < kNumOpKinds; ++k) {
    const std::string kind(op_kind_name(static_cast<OpKind>(k)));
    if (q.out_of_range[k] > 0) c.cost_out_of_range_by_kind[kind] = q.out_of_range[k];
    if (q.by_rule[k] > 0) c.cost_by_rule_by_kind[kind] = q.by_rule[k];
    c.cost_by_rule_queries += q.by_rule[k];
  }
  c.cost_out_of_range_queries = cost.num_out_of_range_queries();
}

}  // namespace

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
      series_(checked_duration_ns(sc.run.duration_s, "the run (run.duration_s)")),
      stats_(sc.slo.ttft_ms, sc.slo.tpot_ms, series_.segment_ns()) {
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
  setup_.report_expert_loads = any_wants_loads_ || opt_.expert_selections;
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
  emits_records_ = !opt_.request_sinks.empty() || opt_.keep_requests;
  spool_ = opt_.record_spool != nullptr ? opt_.record_spool : &memory_spool_;
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
    const int32_t sid = it->second.first;
    const std::string pool = std::move(it->second.second);
    delayed_.erase(it);
    route_seq(sid, pool);
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
  const SimTime max_end =
      sc_.run.max_duration_s
          ? std::max(end, checked_duration_ns(*sc_.run.max_duration_s, "run.max_duration_s"))
          : end;
  // Requests the measured window holds whatever the warm-up cut and wherever the run ends (at
  // `end` or an extension's end, run_until_converged): with a fixed warm-up, from it on; else
  // from the latest detected cut of any end at which the run is not terminating (a terminating
  // run measures every request from the fixed warm-up or 0, steady_state.h).
  const SimTime fixed_ns =
      sc_.run.steady.warmup_s
          ? (from_seconds(*sc_.run.steady.warmup_s) + series_.segment_ns() - 1) /
                series_.segment_ns() * series_.segment_ns()
          : 0;
  SimTime measured_from_ns = fixed_ns;
  if (!sc_.run.steady.warmup_s) {
    std::vector<SimTime> ends = {end};
    while (ends.back() < max_end) ends.push_back(std::min(max_end, ends.back() + end));
    // The latest cut grows with the end, and a run terminating at one end is at every later one.
    for (auto e = ends.rbegin(); e != ends.rend(); ++e) {
      if (workload_ends_before(*e - series_.segment_ns())) continue;
      measured_from_ns = series_.max_auto_warmup_ns(*e);
      break;
    }
  }
  slo_watch_ = std::make_unique<SloWatch>(
      *opt_.stop_on_certain_failure,
      count_open_loop_arrivals(sc_.workload, sim_.root_seed(), "workload", max_end),
      measured_from_ns);
}

bool ClusterSim::workload_ends_before(SimTime t) const {
  const WorkloadSpec& w = sc_.workload;
  const bool counted = w.num_requests || w.num_sessions;
  const bool window = ((w.kind == WorkloadKind::kMooncake || w.kind == WorkloadKind::kAzure) &&
                       w.trace.replay == TraceReplay::kWindow) ||
                      w.kind == WorkloadKind::kRequestTrace;
  // As the run dates the stream's end (cluster_requests.cc): a window's end when it has one and
  // no count, else the last arrival.
  if (w.duration_s && !counted && !window) return from_seconds(*w.duration_s) < t;
  if (!counted && !window) return false;  // a loop or model without an end
  const uint64_t seed = sim_.root_seed();
  return count_open_loop_arrivals(w, seed, "workload", t) ==
         count_open_loop_arrivals(w, seed, "workload", kSimTimeMax);
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
  const SteadyStateResult window = run_until_converged(end);
  for (auto& p : policies_) p->on_finish(*policy_ctx_);
  RunOutput out;
  if (slo_watch_ && slo_watch_->failed()) out.stopped_early = slo_watch_->failure();
  out.cancelled = cancelled_;
  out.end_ns = sim_.now();
  check_conservation(out);
  RunCounters& counters = recorder_.counters();
  for (const Replica& r : replicas_) add_replica_totals(r, recorder_);
  set_cost_query_counters(builder_.cost(), counters);
  if (kv_tiers_) counters.kv_tiers = kv_tiers_->final_counters();
  const WorkloadStats& ws = workload_->stats();
  if (ws.num_rollbacks > 0) counters.actions["rollback"] = ws.num_rollbacks;
  out.requests = std::move(kept_);
  out.gpus = std::move(recorder_.gpus());
  out.counters = counters;
  // The figures are over the requests arriving after the warm-up; GPU time over the whole run.
  const SimTime warmup_ns = std::min(window.warmup_ns, out.end_ns);
  const RequestStats measured = stats_.from(warmup_ns);
  out.summary = summarize(measured, out.gpus, out.counters, out.end_ns - warmup_ns, out.end_ns);
  MeasurementSummary& m = out.summary.measurement;
  m.analysed = true;
  m.warmup_s = to_seconds(warmup_ns);
  m.auto_warmup = window.auto_warmup;
  m.steady = window.steady;
  m.terminating = window.terminating;
  m.converged = window.converged;
  m.max_rel_half_width = sc_.run.steady.max_rel_half_width;
  m.ttft_rel_half_width = window.ttft_rel_half_width.value_or(-1);
  m.tpot_rel_half_width = window.tpot_rel_half_width.value_or(-1);
  m.throughput_rel_half_width = window.throughput_rel_half_width.value_or(-1);
  m.concurrency_rel_half_width = window.concurrency_rel_half_width.value_or(-1);
  m.mean_in_system = window.mean_in_system;
  m.num_warmup_requests = stats_.num_arrived() - measured.num_arrived();
  if (out.end_ns > end) m.extended_to_s = to_seconds(out.end_ns);
  m.reason = window.reason;
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
  if (!expert_selections_.empty()) {
    const auto num_moe = static_cast<size_t>(num_moe_layers(card_));
    const size_t num_experts = expert_selections_.size() / num_moe;
    for (size_t l = 0; l < num_moe; ++l) {
      const auto row = expert_selections_.begin() + static_cast<std::ptrdiff_t>(l * num_experts);
      out.expert_selections.emplace_back(row, row + static_cast<std::ptrdiff_t>(num_experts));
    }
  }
  return out;
}

SteadyStateResult ClusterSim::run_until_converged(SimTime end) {
  const SimTime step = end;
  const SimTime max_end =
      sc_.run.max_duration_s
          ? checked_duration_ns(*sc_.run.max_duration_s, "the run (run.max_duration_s)")
          : end;
  if (max_end < end) {
    throw ConfigError(sc_.source_file, 0, 0, "run.max_duration_s",
                      "below run.duration_s (" + number_text(sc_.run.duration_s) +
                          " s): give a longer one or drop it");
  }
  if (sc_.run.steady.warmup_s && from_seconds(*sc_.run.steady.warmup_s) >= end) {
    throw ConfigError(sc_.source_file, 0, 0, "run.warmup_s",
                      "not below run.duration_s (" + number_text(sc_.run.duration_s) +
                          " s): nothing would be measured");
  }
  // When arrivals ended: the open-loop stream's end, with none of a session's later turns
  // waiting to arrive; absent while they go on.
  auto arrivals_end = [this]() -> std::optional<SimTime> {
    if (!open_loop_end_ns_ || !pending_.empty()) return std::nullopt;
    return open_loop_end_ns_;
  };
  auto analyse = [&] {
    SteadyStateResult w = series_.analyse(sim_.now(), sc_.run.steady, arrivals_end());
    judge_convergence(w, series_.ttft_means(w.warmup_ns), series_.tpot_means(w.warmup_ns),
                      sc_.run.steady);
    // A terminating run is done when its requests are: with more than 1% of them still in flight
    // their latencies (and the p99s) are unknown, not censored at random.
    const int64_t in_flight = series_.in_system(), arrived = num_arrived_;
    if (w.terminating && in_flight * 100 > arrived) {
      w.converged = false;
      w.reason = std::to_string(in_flight) + " of " + std::to_string(arrived) +
                 " requests still in flight at the end of a finite workload (more than 1%): run "
                 "longer (run.max_duration_s)";
    }
    return w;
  };
  sim_.run(end);
  SteadyStateResult window = analyse();
  // Extended only when it ran to its end: not after an early verdict or a cancellation.
  while (!window.converged && end < max_end && sim_.now() == end && !cancelled_ &&
         !(slo_watch_ && slo_watch_->failed())) {
    end = std::min(max_end, end + step);
    sim_.schedule_at(end, k_end_);
    sim_.run(end);
    window = analyse();
  }
  return window;
}

void ClusterSim::retire_finished(bool all) {
  // Only final records retire before the end: their end time is not read.
  const SimTime end_ns = sim_.now();
  while (true) {
    // Spooled records (rejected on arrival, already counted) that arrived before the window's
    // front go first: the sinks see arrival order.
    const int64_t front_idx = records_.empty() ? INT64_MAX : seqs_.front().arrival_idx;
    if (!spool_->empty() && spool_->front_idx() < front_idx) {
      emit_record(spool_->pop(), end_ns);
      continue;
    }
    if (records_.empty() || (!all && records_.front().outcome == RequestOutcome::kInFlight)) break;
    const RequestRecord& rec = records_.front();
    stats_.add(rec, end_ns);
    if (emits_records_) emit_record(rec, end_ns);
    records_.pop_front();
    seqs_.pop_front();
  }
}

void ClusterSim::emit_record(const RequestRecord& rec, SimTime end_ns) {
  for (RequestSink* sink : opt_.request_sinks) sink->add(rec, end_ns);
  if (opt_.keep_requests) kept_.push_back(rec);
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
  MOESIM_CHECK(spool_->empty(), "spooled records left after the last one retired");
  const int64_t completed = stats_.num_completed(), rejected = stats_.num_rejected(),
                in_flight = stats_.num_in_flight(), arrived = num_arrived_;
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
