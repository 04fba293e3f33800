// Paired comparison of two scenarios under common random numbers: both run with the same root
// seed, so their named RNG streams draw the same numbers and, where the scenarios agree on the
// workload, the same requests arrive at the same times; a difference B - A comes from what the
// scenarios change, not from sampling noise. Its bootstrap interval resamples either the
// requests matched by id (one replication, quick, optimistic under queueing) or whole
// replications (N >= 2 seeds, sound under autocorrelation), with draws from the stream
// "study.bootstrap" of the first seed. The methods and the figures: docs/sweeps.md,
// "moesim compare".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/study/bootstrap.h"

namespace moesim::sim::study {

struct CompareOptions {
  uint64_t seed = 1;             // first root seed
  int32_t num_replications = 1;  // >= 1; seeds seed .. seed + N - 1
  int32_t num_resamples = 1000;  // bootstrap resamples, >= 1
  double confidence = 0.95;      // in (0, 1)
  int32_t num_threads = 1;       // >= 1
  // Called with (runs done, 2 x replications) after each run, never concurrently; may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// Figures without data are NaN: a and b where the run has no samples for the figure (a TPOT
// percentile when nothing completed, the attainment when nothing was decided), diff where either
// is, rel_diff where a is also 0. The writers print them as "n/a" / null.
struct MetricComparison {
  std::string metric;  // e.g. "ttft_p99_ms", or "action:<name>" for a policy action count
  std::string unit;    // "ms", "tokens/s", "requests/s", "fraction", "count"
  // A difference of paired values (ttft_paired_mean_diff_ms): a and b are the means it is taken
  // between, not figures of the runs, and are not printed.
  bool difference_only = false;
  double a = 0;         // A's figure (mean over replications)
  double b = 0;         // B's figure (mean over replications)
  double diff = 0;      // B - A (the mean of the paired differences)
  double rel_diff = 0;  // diff / |a|
  // False for action counts with one replication (no per-request units), and where every
  // resample gave the same value (a zero-width interval says nothing of the noise).
  bool has_ci = false;
  double ci_lo = 0;
  double ci_hi = 0;
};

struct CompareResult {
  std::string method;  // "requests" or "replications"
  std::vector<uint64_t> seeds;
  // Requests mode: records of A, of B, ids present in both, and of those the ones with the same
  // arrival time and prompt length in both runs (common random numbers at work).
  int64_t num_requests_a = 0, num_requests_b = 0;
  int64_t num_matched = 0, num_identical = 0;
  // ttft_p50_ms, ttft_p99_ms, tpot_p50_ms, tpot_p99_ms, output_tokens_per_s, requests_per_s,
  // goodput_req_per_s, slo_attainment (met / decided, slo_status in sim/metrics/run_metrics.h);
  // in requests mode also ttft_paired_mean_diff_ms (difference_only: the mean over matched
  // requests with a first token in both runs of TTFT(B) - TTFT(A); a and b are the means of
  // those TTFTs).
  std::vector<MetricComparison> metrics;
  // One per action name counted in any run (union, ordered by name), as "action:<name>".
  std::vector<MetricComparison> actions;
  // Run-level figures of the mechanisms either scenario has (ordered by name; no interval with
  // one replication). With [kv_tiers] on either side: prefix_hit_rate (prompt tokens served from
  // any KV tier over prompt tokens), kv_lower_tier_hit_rate (prefix blocks found in DRAM / SSD
  // over blocks looked up; 0 without tiers), kv_load_ms_mean (mean wait for a tier load; 0
  // without). With [speculative] on either side: tokens_per_verification (committed tokens per
  // decoding sequence and step; 1 without drafts), draft_time_share (draft passes' share of step
  // time; 0 without).
  std::vector<MetricComparison> mechanisms;
  std::vector<std::string> digests_a, digests_b;  // per seed
  bool conservation_ok = true;                    // in every run
  // A and B ran the same events for every seed (equal digests): every difference is 0.
  bool identical = true;
  // Runs whose measured window did not converge (MeasurementSummary), per side, and the first
  // such run's reason.
  int32_t num_not_converged_a = 0, num_not_converged_b = 0;
  std::string not_converged_reason;
};

// Runs both scenarios (with their policies) for each seed and compares them. Throws ConfigError
// when a scenario's policies are invalid or its deployment does not fit in memory.
CompareResult compare_scenarios(const Scenario& a, const Scenario& b,
                                const CompareOptions& options);

}  // namespace moesim::sim::study
