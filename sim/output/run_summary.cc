#include "sim/output/run_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <optional>

#include "base/checked_number.h"
#include "moesim_version.h"
#include "sim/metrics/figure_text.h"
#include "sim/output/cost_query_summary.h"
#include "sim/output/measurement_text.h"
#include "sim/workload/request.h"

namespace moesim::sim::output {
namespace {

using nlohmann::json;

// A figure: the 15-digit value (figure_text.h), or null where it has no data.
json num(double v, bool has = true) { return has ? json(clean_double(v)) : json(nullptr); }
// A byte or token count: a whole number; a figure where it does not fit int64 (a run's total
// bytes can pass 9.2e18), never a wrapped integer.
json count_json(double v) {
  const std::optional<int64_t> whole = checked_llround(v);
  return whole ? json(*whole) : num(v);
}

// A policy metric: bytes as whole numbers (figure_text.h), anything else as a figure.
json metric_json(const std::string& name, double v) {
  return is_bytes_name(name) ? count_json(v) : num(v);
}

// "n/a" or the value formatted with the printf format `f`.
std::string fmt_or_na(const char* f, double v, bool has) {
  if (!has) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// A policy metric for people: bytes in binary units with the exact count, whole numbers as
// integers, anything else with 6 significant digits.
std::string metric_text(const std::string& name, double v) {
  if (is_bytes_name(name)) return bytes_text(v) + " (" + count_text(v) + " bytes)";
  if (std::isfinite(v) && v == std::round(v) && std::fabs(v) < 1e15) return count_text(v);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// The [speculative] figures of a run: committed tokens per verification, the observed
// acceptance per draft position, the draft passes' share of step time.
struct SpeculativeFigures {
  bool has_verifications = false, has_steps = false;
  double tokens_per_verification = 0;  // committed / verifications
  double draft_time_fraction = 0;      // draft_ns / step_ns
  std::vector<double> observed;        // accepted / offered per position (NaN: never offered)
  std::vector<bool> has_observed;
};

SpeculativeFigures speculative_figures(const SpeculativeTotals& t) {
  SpeculativeFigures f;
  f.has_verifications = t.num_verifications > 0;
  if (f.has_verifications) {
    f.tokens_per_verification =
        static_cast<double>(t.committed_tokens) / static_cast<double>(t.num_verifications);
  }
  f.has_steps = t.step_ns > 0;
  if (f.has_steps) {
    f.draft_time_fraction = static_cast<double>(t.draft_ns) / static_cast<double>(t.step_ns);
  }
  for (size_t i = 0; i < t.position_offered.size(); ++i) {
    const bool has = t.position_offered[i] > 0;
    f.has_observed.push_back(has);
    f.observed.push_back(has ? static_cast<double>(t.position_accepted[i]) /
                                   static_cast<double>(t.position_offered[i])
                             : 0.0);
  }
  return f;
}

// Committed tokens per verification of each request domain that verified.
json by_domain_json(const SpeculativeTotals& t) {
  json j = json::object();
  for (int d = 0; d < kNumDomains; ++d) {
    if (t.verifications_by_domain[d] == 0) continue;
    j[std::string(domain_name(static_cast<Domain>(d)))] =
        static_cast<double>(t.committed_by_domain[d]) /
        static_cast<double>(t.verifications_by_domain[d]);
  }
  return j;
}

json speculative_json(const SpeculativeSpec& spec, const SpeculativeTotals& t) {
  const SpeculativeFigures f = speculative_figures(t);
  json observed = json::array(), configured = json::array();
  for (size_t i = 0; i < f.observed.size(); ++i) {
    observed.push_back(num(f.observed[i], f.has_observed[i]));
    configured.push_back(num(spec.acceptance[i]));
  }
  return json{{"method", speculative_method_name(spec.method)},
              {"draft_tokens", spec.num_draft_tokens},
              {"acceptance", configured},
              {"acceptance_observed", observed},
              {"verifications", t.num_verifications},
              {"drafted_tokens", t.drafted_tokens},
              {"accepted_tokens", t.accepted_tokens},
              {"committed_tokens", t.committed_tokens},
              {"tokens_per_verification", num(f.tokens_per_verification, f.has_verifications)},
              {"draft_time_fraction", num(f.draft_time_fraction, f.has_steps)},
              {"tokens_per_verification_by_domain", by_domain_json(t)},
              {"draft_gpus", spec.draft_gpus},
              {"draft_gpu_busy_fraction", num(static_cast<double>(t.draft_gpu_busy_ns) /
                                                  static_cast<double>(t.draft_gpu_step_ns),
                                              t.draft_gpu_step_ns > 0)}};
}

void write_speculative_text(std::ostream& os, const SpeculativeSpec& spec,
                            const SpeculativeTotals& t) {
  const SpeculativeFigures f = speculative_figures(t);
  os << "  speculative "
     << (spec.method == SpeculativeMethod::kDraftModel ? "draft model " + spec.draft_model->name
                                                       : std::string("MTP"))
     << ", " << spec.num_draft_tokens
     << " draft token(s): " << fmt_or_na("%.3f", f.tokens_per_verification, f.has_verifications)
     << " tokens committed per sequence and step (" << t.committed_tokens << " over "
     << t.num_verifications << " verifications), draft passes "
     << fmt_or_na("%.1f%%", 100 * f.draft_time_fraction, f.has_steps) << " of step time\n"
     << "              acceptance by position, observed (configured):";
  for (size_t i = 0; i < f.observed.size(); ++i) {
    os << " " << fmt_or_na("%.3f", f.observed[i], f.has_observed[i]) << " ("
       << fmt("%.3f", spec.acceptance[i]) << ")";
  }
  os << "\n";
  bool by_domain = false;
  for (const auto& a : spec.acceptance_by_domain) by_domain = by_domain || !a.empty();
  if (by_domain) {
    os << "              tokens per verification by domain:";
    for (int d = 0; d < kNumDomains; ++d) {
      if (t.verifications_by_domain[d] == 0) continue;
      os << " " << domain_name(static_cast<Domain>(d)) << " "
         << fmt("%.3f", static_cast<double>(t.committed_by_domain[d]) /
                            static_cast<double>(t.verifications_by_domain[d]));
    }
    os << "\n";
  }
  if (spec.draft_gpus > 0) {
    os << "              draft model on " << spec.draft_gpus
       << " GPU(s) of its own per replica, busy "
       << fmt_or_na("%.1f%%",
                    100 * static_cast<double>(t.draft_gpu_busy_ns) /
                        static_cast<double>(t.draft_gpu_step_ns),
                    t.draft_gpu_step_ns > 0)
       << " of the steps' time\n";
  }
}

// Tiered KV cache (docs/outputs.md, `kv_tiers`): per tier, hit rates over the prefix blocks
// looked up and over admitted prompt tokens, and bytes moved.
json kv_tiers_json(const RunSummary& s) {
  const KvTierCounters& k = s.counters.kv_tiers;
  const bool has_blocks = k.lookup_blocks > 0;
  const bool has_tokens = s.counters.prompt_tokens_total > 0;
  json j;
  j["lookup_blocks"] = k.lookup_blocks;
  int64_t total = 0;
  for (int t = 0; t < kNumKvTiers; ++t) {
    const std::string name = kKvTierNames[t];
    const double blocks = static_cast<double>(k.hit_blocks[t]);
    total += k.hit_blocks[t];
    j["hit_blocks"][name] = k.hit_blocks[t];
    j["hit_tokens"][name] = k.hit_blocks[t] * kPrefixBlockTokens;
    j["block_hit_rate"][name] = num(blocks / static_cast<double>(k.lookup_blocks), has_blocks);
    j["token_hit_rate"][name] =
        num(blocks * kPrefixBlockTokens / static_cast<double>(s.counters.prompt_tokens_total),
            has_tokens);
    j["bytes_in"][name] = count_json(k.bytes_in[t]);
    j["bytes_out"][name] = count_json(k.bytes_out[t]);
    if (t > 0) j["entries_at_end"][name] = k.entries_at_end[t];
  }
  j["block_hit_rate"]["total"] =
      num(static_cast<double>(total) / static_cast<double>(k.lookup_blocks), has_blocks);
  j["dropped_bytes"] = count_json(k.dropped_bytes);
  j["dropped_entries"] = k.dropped_entries;
  j["duplicate_entries"] = k.duplicate_entries;
  j["written_through_bytes"] = count_json(k.written_through_bytes);
  j["loads"] = k.num_loads;
  j["pcie_bytes"] = count_json(k.pcie_bytes);
  j["nvme_bytes"] = count_json(k.nvme_bytes);
  j["remote_hit_blocks"] = k.remote_hit_blocks;
  j["network_bytes"] = count_json(k.network_bytes);
  j["contention"] = {{"load_delay_s", k.load_contention_s},
                     {"demotion_delay_s", k.demotion_contention_s},
                     {"slowed_gpu_steps", k.slowed_gpu_steps}};
  j["ttft_split_ms"] = {{"queueing", percentiles_json(s.queueing_ms)},
                        {"kv_load", percentiles_json(s.kv_load_ms)},
                        {"prefill", percentiles_json(s.prefill_ms)}};
  return j;
}

void write_kv_tiers_text(std::ostream& os, const RunSummary& s) {
  const KvTierCounters& k = s.counters.kv_tiers;
  const bool has = k.lookup_blocks > 0;
  const auto lookups = static_cast<double>(k.lookup_blocks);
  int64_t total = 0;
  os << "  KV tiers    " << k.lookup_blocks << " prefix blocks looked up; block hit rate";
  for (int t = 0; t < kNumKvTiers; ++t) {
    total += k.hit_blocks[t];
    os << " " << kKvTierNames[t] << " "
       << fmt_or_na("%.1f%%", 100 * static_cast<double>(k.hit_blocks[t]) / lookups, has);
  }
  os << ", total " << fmt_or_na("%.1f%%", 100 * static_cast<double>(total) / lookups, has) << "\n";
  os << "              moved in/out: hbm " << bytes_text(k.bytes_in[0]) << " loaded / "
     << bytes_text(k.bytes_out[0]) << " demoted, dram " << bytes_text(k.bytes_in[1]) << " / "
     << bytes_text(k.bytes_out[1]) << ", ssd " << bytes_text(k.bytes_in[2]) << " / "
     << bytes_text(k.bytes_out[2]) << ", dropped " << bytes_text(k.dropped_bytes)
     << ", written through " << bytes_text(k.written_through_bytes) << "\n";
  os << "              " << k.num_loads << " loads; PCIe " << bytes_text(k.pcie_bytes) << ", NVMe "
     << bytes_text(k.nvme_bytes) << ", network " << bytes_text(k.network_bytes) << " ("
     << k.remote_hit_blocks << " remote hit blocks)\n"
     << "              PCIe shared with the all-to-all: loads delayed "
     << fmt_or_na("%.3f", k.load_contention_s, true) << " s, demotions "
     << fmt_or_na("%.3f", k.demotion_contention_s, true) << " s (GPU sums); " << k.slowed_gpu_steps
     << " GPU-steps slowed\n"
     << "              TTFT split (mean ms): queueing "
     << fmt_or_na("%.2f", s.queueing_ms.mean, s.queueing_ms.count > 0) << ", KV load "
     << fmt_or_na("%.2f", s.kv_load_ms.mean, s.kv_load_ms.count > 0) << ", prefill "
     << fmt_or_na("%.2f", s.prefill_ms.mean, s.prefill_ms.count > 0) << "\n";
}

}  // namespace

json summary_json(const Scenario& sc, const RunOutput& out, uint64_t seed) {
  const RunSummary& s = out.summary;
  json j;
  j["scenario"] = sc.name;
  j["model"] = sc.model->name;
  j["topology"] = sc.topology->name();
  j["seed"] = seed;
  j["fidelity"] = fidelity_name(sc.run.fidelity);
  j["workload"] = {{"kind", workload_kind_name(sc.workload.kind)},
                   {"replay", nullptr},
                   {"description", workload_description(sc.workload)}};
  if (sc.workload.kind == WorkloadKind::kMooncake || sc.workload.kind == WorkloadKind::kAzure) {
    j["workload"]["replay"] = trace_replay_name(sc.workload.trace.replay);
  }
  j["event_digest"] = out.digest_hex;
  j["num_events"] = out.num_events;
  j["simulated_s"] = num(to_seconds(out.end_ns));
  j["measured_s"] = num(s.duration_s);
  if (s.measurement.analysed) j["measurement"] = measurement_json(s.measurement);
  j["requests"] = {
      {"arrived", s.num_arrived},
      {"completed", s.num_completed},
      {"rejected", s.num_rejected},
      {"in_flight", s.num_in_flight},
      {"waiting_first_token", s.num_waiting_first_token},
      {"max_wait_first_token_ms", num(s.max_wait_first_token_ms, s.has.max_wait_first_token)}};
  j["conservation_ok"] = out.conservation_ok;
  j["queueing_ms"] = percentiles_json(s.queueing_ms);
  j["ttft_ms"] = percentiles_json(s.ttft_ms);
  j["tpot_ms"] = percentiles_json(s.tpot_ms);
  j["e2e_ms"] = percentiles_json(s.e2e_ms);
  j["throughput"] = {{"input_tokens_per_s", num(s.input_tokens_per_s, s.has.rates)},
                     {"output_tokens_per_s", num(s.output_tokens_per_s, s.has.rates)},
                     {"completed_requests_per_s", num(s.requests_per_s, s.has.rates)}};
  j["slo"] = {{"ttft_ms", num(s.slo.ttft_ms)},
              {"tpot_ms", num(s.slo.tpot_ms)},
              {"num_met", s.slo.num_met},
              {"num_decided", s.slo.num_decided},
              {"attainment", num(s.slo.attainment, s.has.attainment)},
              {"goodput_requests_per_s", num(s.slo.goodput_req_per_s, s.has.rates)}};
  j["gpu_time_fraction"] = {{"compute", num(s.compute_fraction, s.has.gpu_time)},
                            {"communication", num(s.comm_fraction, s.has.gpu_time)},
                            {"barrier_wait", num(s.wait_fraction, s.has.gpu_time)}};
  j["kv_high_water_fraction"] = num(s.kv_high_water_fraction, s.has.kv_pool);
  j["prefix_cache_hit_rate"] = num(s.prefix_cache_hit_rate, s.has.prefix_cache);
  j["expert_gpu_imbalance"] = num(s.expert_imbalance, s.has.expert_load);
  j["expert_gpu_imbalance_mean"] = num(s.expert_gpu_imbalance_mean, s.has.gpu_balance);
  j["expert_gpu_balancedness"] = num(s.expert_gpu_balancedness, s.has.gpu_balance);
  j["expert_slot_imbalance_mean"] = num(s.expert_slot_imbalance_mean, s.has.slot_balance);
  j["expert_slot_balancedness"] = num(s.expert_slot_balancedness, s.has.slot_balance);
  const RunCounters& c = s.counters;
  j["counters"] = {{"steps", c.num_steps},
                   {"preemptions", c.num_preemptions},
                   {"kv_evictions", c.kv_evictions},
                   {"kv_transfers", c.kv_transfers},
                   {"kv_transfer_bytes", count_json(c.kv_transfer_bytes)},
                   {"cost_out_of_range_queries", c.cost_out_of_range_queries},
                   {"dispatch_bytes", count_json(c.dispatch_bytes)},
                   {"combine_bytes", count_json(c.combine_bytes)}};
  add_cost_query_json(j["counters"], c);
  if (sc.run.fidelity == Fidelity::kFast) {
    j["counters"]["fast_fidelity_layers"] = c.fast_fidelity_layers;
    j["counters"]["exact_fidelity_layers"] = c.exact_fidelity_layers;
  }
  if (out.fidelity_checked) {
    const FidelityAgreement a =
        fidelity_agreement(out.fidelity_samples, out.fidelity_samples_skipped);
    const bool has = a.count > 0;
    j["fidelity_check"] = {{"steps", a.count},
                           {"skipped", a.skipped},
                           {"exact_mean_ms", num(a.exact_mean_ms, has)},
                           {"fast_mean_ms", num(a.fast_mean_ms, has)},
                           {"exact_p50_ms", num(a.exact_p50_ms, has)},
                           {"fast_p50_ms", num(a.fast_p50_ms, has)},
                           {"exact_p99_ms", num(a.exact_p99_ms, has)},
                           {"fast_p99_ms", num(a.fast_p99_ms, has)},
                           {"mean_rel", num(a.mean_rel, has)},
                           {"p50_rel", num(a.p50_rel, has)},
                           {"p99_rel", num(a.p99_rel, has)},
                           {"max_step_rel", num(a.max_step_rel, has)},
                           {"fast_layer_share", num(a.fast_layer_share, has)}};
  }
  if (sc.speculative.enabled) j["speculative"] = speculative_json(sc.speculative, out.speculative);
  if (c.kv_tiers.enabled) j["kv_tiers"] = kv_tiers_json(s);
  j["actions"] = json::object();
  for (const auto& [k, v] : c.actions) j["actions"][k] = v;
  j["policy_metrics"] = json::object();
  for (const auto& [k, v] : c.policy_metrics) j["policy_metrics"][k] = metric_json(k, v);
  if (!out.gpus.empty()) {
    const GpuRecord& g = out.gpus.front();
    j["memory_per_gpu"] = {{"hbm_bytes", sc.topology->gpu_spec().hbm_bytes},
                           {"weight_bytes", count_json(g.weight_bytes)},
                           {"routed_expert_slots", g.routed_expert_slots},
                           {"routed_expert_weight_bytes", count_json(g.routed_expert_weight_bytes)},
                           {"kv_pool_bytes", count_json(g.kv_pool_bytes)},
                           {"kv_block_bytes", count_json(g.kv_block_bytes)},
                           {"num_kv_blocks", g.num_kv_blocks}};
  }
  return j;
}

namespace {

// The first GPU's memory, the cost model, the fidelity and the fidelity check.
void write_gpu_cost_and_tier_text(std::ostream& os, const Scenario& sc, const RunOutput& out) {
  const RunCounters& c = out.summary.counters;
  if (!out.gpus.empty()) {
    const GpuRecord& gpu = out.gpus.front();
    os << "  per GPU     HBM " << bytes_text(static_cast<double>(sc.topology->gpu_spec().hbm_bytes))
       << ": weights " << bytes_text(gpu.weight_bytes) << ", KV pool "
       << bytes_text(gpu.kv_pool_bytes) << " (" << gpu.num_kv_blocks << " blocks of "
       << bytes_text(gpu.kv_block_bytes) << ")  [first GPU]\n";
    if (gpu.num_moe_layers > 0) {
      os << "              routed experts " << gpu.routed_expert_slots << " slots ("
         << number_text(static_cast<double>(gpu.routed_expert_slots) / gpu.num_moe_layers)
         << " per MoE layer), " << bytes_text(gpu.routed_expert_weight_bytes) << "\n";
    }
  }
  write_cost_query_text(os, sc.cost, c);
  if (sc.run.fidelity == Fidelity::kFast) {
    const int64_t layers = c.fast_fidelity_layers + c.exact_fidelity_layers;
    os << "  fidelity    fast: " << c.fast_fidelity_layers << " of " << layers
       << " (MoE layer, step) samples timed from per-GPU sums, "
       << fmt_or_na("%.1f%%", layers > 0 ? 100.0 * c.fast_fidelity_layers / layers : 0, layers > 0)
       << " (docs/fast_fidelity.md)\n";
  }
  if (out.fidelity_checked) {
    const FidelityAgreement a =
        fidelity_agreement(out.fidelity_samples, out.fidelity_samples_skipped);
    const bool has = a.count > 0;
    os << "  fidelity check  " << a.count << " steps on both fidelities (" << a.skipped
       << " skipped: transfer in flight); step ms exact / fast (fast - exact):\n"
       << "              mean " << fmt_or_na("%.3f", a.exact_mean_ms, has) << " / "
       << fmt_or_na("%.3f", a.fast_mean_ms, has) << " ("
       << fmt_or_na("%+.2f%%", 100 * a.mean_rel, has) << "), p50 "
       << fmt_or_na("%.3f", a.exact_p50_ms, has) << " / " << fmt_or_na("%.3f", a.fast_p50_ms, has)
       << " (" << fmt_or_na("%+.2f%%", 100 * a.p50_rel, has) << "), p99 "
       << fmt_or_na("%.3f", a.exact_p99_ms, has) << " / " << fmt_or_na("%.3f", a.fast_p99_ms, has)
       << " (" << fmt_or_na("%+.2f%%", 100 * a.p99_rel, has) << ")\n"
       << "              largest step difference " << fmt_or_na("%.2f%%", 100 * a.max_step_rel, has)
       << "; fast fidelity timed " << fmt_or_na("%.1f%%", 100 * a.fast_layer_share, has)
       << " of their MoE layers\n";
  }
}

}  // namespace

void write_summary_text(std::ostream& os, const Scenario& sc, const RunOutput& out, uint64_t seed) {
  const RunSummary& s = out.summary;
  const MeasurementSummary& m = s.measurement;
  os << "moesim run: " << sc.name;
  if (m.analysed && !m.converged) os << "  [NOT CONVERGED: " << m.reason << "]";
  // The figures below are over the measured requests (docs/outputs.md, "Steady state").
  os << "\n";
  os << "  model " << sc.model->name << ", topology " << sc.topology->name() << ", "
     << sc.deployment.num_replicas << " replica(s) x " << sc.deployment.gpus_per_replica
     << " GPUs, network " << sc.network_model << ", seed " << seed << "\n";
  os << "  workload " << workload_description(sc.workload) << "\n";
  os << "  simulated " << fmt("%.3f", to_seconds(out.end_ns)) << " s, " << out.num_events
     << " events, " << s.counters.num_steps << " steps\n";
  write_measurement_text(os, m);
  os << "\n";
  os << "  requests   " << (m.analysed ? "measured " : "arrived ") << s.num_arrived
     << "  completed " << s.num_completed << "  rejected " << s.num_rejected << "  in flight "
     << s.num_in_flight;
  if (s.has.max_wait_first_token) {
    os << " (" << s.num_waiting_first_token << " without a first token, longest wait "
       << fmt("%.0f", s.max_wait_first_token_ms) << " ms)\n";
  } else {
    os << " (none without a first token)\n";
  }
  os << "  conservation " << (out.conservation_ok ? "ok: " : "BROKEN: ") << out.conservation_message
     << "\n\n";
  os << "  latency (ms)         p50        p90        p99       mean        max   samples\n";
  auto row = [&os](const char* name, const Percentiles& p) { write_latency_row(os, name, p); };
  row("queueing", s.queueing_ms);
  row("TTFT", s.ttft_ms);
  row("TPOT", s.tpot_ms);
  row("end-to-end", s.e2e_ms);
  os << "\n  throughput  " << fmt_or_na("%.1f", s.input_tokens_per_s, s.has.rates)
     << " input tok/s, " << fmt_or_na("%.1f", s.output_tokens_per_s, s.has.rates)
     << " output tok/s, " << fmt_or_na("%.2f", s.requests_per_s, s.has.rates)
     << " completed req/s\n";
  // Attainment over decided requests (slo_status, run_metrics.h; docs/outputs.md).
  os << "  SLO (TTFT <= " << fmt("%.0f", s.slo.ttft_ms)
     << " ms, TPOT <= " << fmt("%.0f", s.slo.tpot_ms) << " ms): " << s.slo.num_met << " met of "
     << s.slo.num_decided << " decided, attainment "
     << fmt_or_na("%.1f%%", 100 * s.slo.attainment, s.has.attainment) << ", goodput "
     << fmt_or_na("%.2f", s.slo.goodput_req_per_s, s.has.rates) << " req/s\n";
  // Fractions of GPUs x simulated time (docs/outputs.md). With micro-batch overlap the collectives
  // run under compute, so the three overlap: say so rather than print a sum above 100% unlabelled.
  const bool g = s.has.gpu_time;
  os << "  GPU time    compute " << fmt_or_na("%.1f%%", 100 * s.compute_fraction, g)
     << ", communication " << fmt_or_na("%.1f%%", 100 * s.comm_fraction, g) << ", barrier wait "
     << fmt_or_na("%.1f%%", 100 * s.wait_fraction, g) << " of GPUs x simulated time\n";
  if (sc.deployment.overlap != OverlapMode::kNone) {
    os << "              (overlapping: with micro-batch overlap communication runs under compute,\n"
          "              so the three can sum above 100%)\n";
  }
  const RunCounters& c = s.counters;
  os << "  memory      KV high-water "
     << fmt_or_na("%.1f%% of pool", 100 * s.kv_high_water_fraction, s.has.kv_pool)
     << ", prefix-cache hit rate "
     << fmt_or_na("%.1f%%", 100 * s.prefix_cache_hit_rate, s.has.prefix_cache) << ", preemptions "
     << c.num_preemptions << ", KV evictions " << c.kv_evictions << "\n";
  if (c.kv_tiers.enabled) write_kv_tiers_text(os, s);
  os << "  experts     per-GPU load imbalance (max-mean)/mean "
     << fmt_or_na("%.3f", s.expert_imbalance, s.has.expert_load)
     << " (summed loads); per layer and step:\n"
     << "              by GPU imbalance "
     << fmt_or_na("%.3f", s.expert_gpu_imbalance_mean, s.has.gpu_balance) << ", balancedness "
     << fmt_or_na("%.3f", s.expert_gpu_balancedness, s.has.gpu_balance)
     << " (mean/max); by slot imbalance "
     << fmt_or_na("%.3f", s.expert_slot_imbalance_mean, s.has.slot_balance) << ", balancedness "
     << fmt_or_na("%.3f", s.expert_slot_balancedness, s.has.slot_balance) << "\n";
  os << "  traffic     dispatch " << bytes_text(c.dispatch_bytes) << ", combine "
     << bytes_text(c.combine_bytes) << ", KV transfers " << c.kv_transfers << " ("
     << bytes_text(c.kv_transfer_bytes) << ")\n";
  write_gpu_cost_and_tier_text(os, sc, out);
  if (sc.speculative.enabled) write_speculative_text(os, sc.speculative, out.speculative);
  os << "  actions    ";
  if (c.actions.empty()) os << " none";
  for (const auto& [k, v] : c.actions) os << " " << k << "=" << v;
  os << "\n";
  if (!c.policy_metrics.empty()) {
    os << "  policy metrics\n";
    for (const auto& [k, v] : c.policy_metrics) {
      os << "    " << std::left << std::setw(48) << k << std::right << " " << metric_text(k, v)
         << "\n";
    }
  }
  os << "\n  event digest " << out.digest_hex << "\n";
}

}  // namespace moesim::sim::output
