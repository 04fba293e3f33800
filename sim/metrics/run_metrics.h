// What a run measured: one record per request, one per GPU, run-level counters, and the summary
// users of LLM serving look at (latency percentiles, throughput, goodput under SLOs, busy
// fractions, memory high-water, preemptions, prefix-cache hit rate). Metrics observe the
// simulation; nothing here feeds back into it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/kv_tier_counters.h"

namespace moesim::sim {

enum class RequestOutcome { kCompleted, kRejected, kInFlight };
// "completed", "rejected", "in_flight".
const char* request_outcome_name(RequestOutcome o);

struct RequestRecord {
  int32_t request_id = -1;
  int32_t session_id = -1;  // -1: not part of an agent session
  int32_t turn_idx = 0;
  int32_t attempt_idx = 0;
  int32_t replica = -1;  // replica that served (decode replica with P/D), -1 when rejected
  std::string domain;
  RequestOutcome outcome = RequestOutcome::kInFlight;
  std::string reject_reason;  // kRejected only
  SimTime arrival_ns = 0;
  SimTime first_scheduled_ns = -1;  // -1: never scheduled
  SimTime first_token_ns = -1;
  SimTime done_ns = -1;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;         // requested
  int64_t generated_tokens = 0;      // produced by the end of the run
  int64_t cached_prompt_tokens = 0;  // prefix-cache hits (first admission)
  int32_t num_preemptions = 0;
  // Tiered KV cache: time the first admission waited for its prefix to load from host DRAM /
  // SSD (0 without a load), and the prompt tokens loaded (part of cached_prompt_tokens).
  SimTime kv_load_ns = 0;
  int64_t loaded_prompt_tokens = 0;

  SimTime ttft_ns() const { return first_token_ns >= 0 ? first_token_ns - arrival_ns : -1; }
  SimTime queueing_ns() const {
    return first_scheduled_ns >= 0 ? first_scheduled_ns - arrival_ns : -1;
  }
  SimTime e2e_ns() const { return done_ns >= 0 ? done_ns - arrival_ns : -1; }
  // TTFT = queueing + KV load + prefill: the rest after queueing and the load wait, -1 without
  // a first token (prefill includes waits for step slots after admission).
  SimTime prefill_ns() const {
    return first_token_ns >= 0 ? first_token_ns - first_scheduled_ns - kv_load_ns : -1;
  }
  // Mean time per output token after the first; -1 with fewer than two tokens.
  double tpot_ns() const {
    if (done_ns < 0 || generated_tokens < 2) return -1;
    return static_cast<double>(done_ns - first_token_ns) /
           static_cast<double>(generated_tokens - 1);
  }
};

struct GpuRecord {
  int32_t gpu = 0;
  int32_t replica = 0;
  SimTime compute_ns = 0;
  SimTime comm_ns = 0;
  SimTime wait_ns = 0;
  double weight_bytes = 0;
  // Routed-expert slots the memory layout holds on the GPU, summed over MoE layers (a slot is one
  // expert's weights in one layer), and their bytes; num_moe_layers to read them per layer.
  int64_t routed_expert_slots = 0;
  int32_t num_moe_layers = 0;
  double routed_expert_weight_bytes = 0;
  double kv_pool_bytes = 0;
  int64_t num_kv_blocks = 0;
  int64_t kv_high_water_blocks = 0;
  double kv_block_bytes = 0;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  int64_t count = 0;  // 0: no samples, and the figures above mean nothing (written as n/a)
  // Requests in flight at the end whose value is only bounded below (right-censored): with some,
  // p50 / p90 / p99 are Kaplan-Meier estimates (request_stats.h), and a quantile the estimate
  // never reaches is a lower bound, written ">= X" (JSON: "p99_lower_bound": true). mean and max
  // are over the observed values only.
  int64_t num_censored = 0;
  struct LowerBound {
    bool p50 = false, p90 = false, p99 = false;
  };
  LowerBound lower_bound;
};
// Linear interpolation between closest ranks (numpy's default); all zero for no values.
Percentiles percentiles(std::vector<double> values);

// SLO attainment: one definition for run, sweep, compare and search (docs/outputs.md).
// A request is
//   met        when it completed with TTFT <= the TTFT limit and, if it has a TPOT (two tokens or
//              more), TPOT <= the TPOT limit;
//   missed     when it completed outside a limit, was rejected, or is in flight at `end_ns` (a
//              censored request) past a limit already: its first token later than the TTFT
//              limit or still without one after it, or decoding for longer than its requested
//              tokens after the first times the TPOT limit;
//   undecided  otherwise: in flight at the end and still within its limits.
// Attainment is met / decided (met + missed): a rejected, starved or already-late request counts
// against the deployment; only a request still within every limit at the end does not count.
enum class SloStatus { kMet, kMissed, kUndecided };
SloStatus slo_status(const RequestRecord& r, SimTime end_ns, double ttft_limit_ms,
                     double tpot_limit_ms);

struct SloCounts {
  int64_t num_met = 0;
  int64_t num_decided = 0;  // met + missed
};
SloCounts count_slo(const std::vector<RequestRecord>& requests, SimTime end_ns,
                    double ttft_limit_ms, double tpot_limit_ms);

struct RunCounters {
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t prompt_tokens_total = 0;   // prompt tokens of admitted requests (first admission)
  int64_t prompt_tokens_cached = 0;  // of which served from the prefix cache
  int64_t kv_evictions = 0;
  int64_t kv_transfers = 0;  // P/D disaggregation
  double kv_transfer_bytes = 0;
  // Cost-model queries outside the range a calibrated profile was fitted on and priced by no
  // stated rule, and queries priced by a stated rule (docs/calibration.md, "Where no fit
  // applies"); both 0 for roofline. Per op kind name, the kinds with a nonzero count.
  int64_t cost_out_of_range_queries = 0;
  int64_t cost_by_rule_queries = 0;
  std::map<std::string, int64_t> cost_out_of_range_by_kind;
  std::map<std::string, int64_t> cost_by_rule_by_kind;
  double dispatch_bytes = 0;
  double combine_bytes = 0;
  double max_gpu_selections_sum = 0;  // imbalance: sum over steps and MoE layers
  double mean_gpu_selections_sum = 0;
  // Per (MoE layer, step) balance: sums over the samples of (max - mean) / mean and of
  // mean / max, by GPU and by expert slot, and the numbers of samples (StepUsage).
  double gpu_imbalance_sum = 0;
  double gpu_balancedness_sum = 0;
  int64_t num_gpu_balance_samples = 0;
  double slot_imbalance_sum = 0;
  double slot_balancedness_sum = 0;
  int64_t num_slot_balance_samples = 0;
  // Fast fidelity (run.fidelity = "fast"): (MoE layer, step) samples it timed and those left to the
  // exact fidelity (StepTotals). Both 0 on the exact fidelity.
  int64_t fast_fidelity_layers = 0;
  int64_t exact_fidelity_layers = 0;
  // Tiered KV cache ([kv_tiers]); enabled = false without it.
  KvTierCounters kv_tiers;
  // Policy and workload actions by name (e.g. "rollback", "reject:too_long"), ordered.
  std::map<std::string, int64_t> actions;
  // Figures reported by policies (PolicyContext::report_metric), ordered by name.
  std::map<std::string, double> policy_metrics;
};

struct SloSummary {
  double ttft_ms = 0, tpot_ms = 0;  // the limits
  int64_t num_met = 0;              // completed requests meeting both (slo_status)
  int64_t num_decided = 0;          // met or missed (slo_status)
  double goodput_req_per_s = 0;     // num_met / duration
  double attainment = 0;            // num_met / num_decided; 0 (no data) when nothing is decided
};

// The measured window of a run (sim/metrics/steady_state.h; docs/outputs.md, "Steady state"):
// the figures of the summary are over the requests arriving in [warmup_s, warmup_s +
// duration_s), the run's end; GPU time fractions over the whole run.
struct MeasurementSummary {
  double warmup_s = 0;
  bool auto_warmup = false;  // detected (MSER-5), not set by [run] warmup_s
  bool steady = true;        // a warm-up cut was found (always true with a fixed warm-up)
  bool terminating = false;  // a finite workload drained before the end: every request measured
  bool converged = true;     // steady, TTFT and TPOT batch-means half-widths within the target
  double max_rel_half_width = 0;
  // Relative 95% half-widths of the batch means (negative: not computed, too few batches or a
  // zero mean): TTFT and TPOT (judged), output tokens/s and requests in the system (reported).
  double ttft_rel_half_width = -1, tpot_rel_half_width = -1;
  double throughput_rel_half_width = -1, concurrency_rel_half_width = -1;
  double mean_in_system = 0;
  int64_t num_warmup_requests = 0;  // arrived during the warm-up: not measured
  double extended_to_s = 0;         // the run's end when [run] max_duration_s extended it, else 0
  std::string reason;               // why not converged; empty when converged
  bool analysed = false;            // false for summaries of records (tests, replays)
};

struct RunSummary {
  double duration_s = 0;  // the measured window's length
  int64_t num_arrived = 0, num_completed = 0, num_rejected = 0, num_in_flight = 0;
  // In flight without a first token at the end (queued or in prefill), and the longest such
  // wait: TTFT percentiles cover only requests that got a first token, so a queue building
  // behind a saturated deployment shows here, not in them.
  int64_t num_waiting_first_token = 0;
  double max_wait_first_token_ms = 0;
  Percentiles queueing_ms, ttft_ms, tpot_ms, e2e_ms;
  // TTFT split of requests with a first token: KV load wait and prefill (TTFT - queueing - load).
  Percentiles kv_load_ms, prefill_ms;
  double input_tokens_per_s = 0, output_tokens_per_s = 0, requests_per_s = 0;
  SloSummary slo;
  double prefix_cache_hit_rate = 0;
  // GpuRecord compute_ns / comm_ns / wait_ns summed over GPUs, each over (number of GPUs x
  // duration_ns): shares of GPU time. Without micro-batch overlap they are disjoint (the rest is
  // mostly idle between steps); with it, communication runs under compute, so the three overlap
  // and can sum above 1.
  double compute_fraction = 0, comm_fraction = 0, wait_fraction = 0;
  double kv_high_water_fraction = 0;  // max over GPUs of high-water / pool
  // Routed selections by GPU: (sum over MoE layers and steps of the hottest GPU's - sum of the
  // mean GPU's) / sum of the mean GPU's, a ratio of sums (summary key expert_gpu_imbalance).
  double expert_imbalance = 0;
  // Averages over (MoE layer, step) samples of the per-layer (max - mean) / mean (the
  // TensorRT-LLM wide-EP imbalance) and mean / max (EPLB's balancedness), by GPU and by expert
  // slot (RunCounters; docs/outputs.md).
  double expert_gpu_imbalance_mean = 0;
  double expert_gpu_balancedness = 0;
  double expert_slot_imbalance_mean = 0;
  double expert_slot_balancedness = 0;
  RunCounters counters;
  MeasurementSummary measurement;

  // Which figures have data. The others are 0 above and are written as "n/a" in text, null in
  // JSON and an empty CSV cell (sim/metrics/figure_text.h); percentiles say so by their count.
  struct Has {
    bool rates = false;                 // throughput and goodput: duration > 0
    bool attainment = false;            // slo.num_decided > 0
    bool max_wait_first_token = false;  // num_waiting_first_token > 0
    bool prefix_cache = false;          // some admitted request had a prompt
    bool gpu_time = false;              // GPUs and duration > 0: compute / comm / wait fractions
    bool kv_pool = false;               // some GPU has KV blocks: kv_high_water_fraction
    bool expert_load = false;           // some MoE layer routed tokens: expert_imbalance
    bool gpu_balance = false;           // a (layer, step) sample by GPU: expert_gpu_* below
    bool slot_balance = false;          // a (layer, step) sample by slot: expert_slot_*
  };
  Has has;
};

// Builds the summary. `duration_ns` is the simulated span measured.
RunSummary summarize(const std::vector<RequestRecord>& requests, const std::vector<GpuRecord>& gpus,
                     const RunCounters& counters, SimTime duration_ns, double slo_ttft_ms,
                     double slo_tpot_ms);

}  // namespace moesim::sim
