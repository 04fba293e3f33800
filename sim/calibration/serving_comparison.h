// Serving validation (`moesim validate --serving`, docs/calibration.md): the requests a real
// engine served (`moesim-engine serve`, repeated on one request trace) against the simulator's
// re-simulation of the same arrivals, at every load point of a rate sweep.
//
// Both sides are read from the same requests.csv schema (docs/outputs.md) and reduced by the same
// code, so a difference is the serving model's, not the bookkeeping's. The engine's run-to-run
// spread sits beside every error: below it, an error is noise the engine itself shows. The knee
// (the highest offered rate meeting the scenario's SLOs) is found by the same rule on both sides
// and splits the load points into below and above it, where planners need different accuracy.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moesim::sim {

enum class ServedOutcome { kCompleted, kRejected, kInFlight };

// One row of a requests.csv: the columns the comparison reads. Latencies in ms; an empty cell
// (a time not reached, or TPOT of a one-token output) is nullopt.
struct ServedRequest {
  int64_t request_id = 0;
  ServedOutcome outcome = ServedOutcome::kCompleted;
  int64_t arrival_ns = 0;
  int64_t done_ns = -1;  // -1: not done
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  std::optional<double> queueing_ms, ttft_ms, tpot_ms, e2e_ms;
};

// One serve run of a load point, or its re-simulation.
struct ServingRun {
  std::string dir;       // where it was read from (messages and the report)
  std::string trace;     // the request trace it served, as its summary names it
  std::string scenario;  // the scenario its summary names (empty for a re-simulation)
  std::vector<ServedRequest> requests;
};

// The compared figures of one run, in this order. Percentiles (linear interpolation between
// closest ranks, as the simulator's summary) are over completed requests; TPOT over those with
// two or more generated tokens. output_tokens_per_s: generated tokens of completed requests over
// the time from the first arrival to the last completion. preemptions: summed over requests.
enum class ServingMetric {
  kTtftP50,
  kTtftP90,
  kTtftP99,
  kTpotP50,
  kTpotP90,
  kTpotP99,
  kE2eP50,
  kE2eP90,
  kE2eP99,
  kQueueingP50,
  kQueueingP90,
  kQueueingP99,
  kOutputTokensPerS,
  kPreemptions,
  kCompleted,
};
inline constexpr int kNumServingMetrics = 15;
// "ttft_p50_ms", ..., "output_tokens_per_s", "preemptions", "completed".
const char* serving_metric_name(ServingMetric m);
// "ms", "tokens/s" or "count".
const char* serving_metric_unit(ServingMetric m);

struct ServingFigures {
  // nullopt: no sample (no completed request; TPOT with no multi-token output).
  std::array<std::optional<double>, kNumServingMetrics> values;
  int64_t num_arrived = 0;
  // (arrivals - 1) / (last arrival - first arrival), requests/s; 0 with fewer than 2 arrivals
  // or all at one instant.
  double offered_rate_per_s = 0;
};

// The figures of one run.
ServingFigures serving_figures(const ServingRun& run);

// One metric at one load point: the engine's runs, their spread, and the simulation's error.
struct MetricComparison {
  ServingMetric metric{};
  std::vector<double> engine;  // one value per engine run that has one
  double engine_min = 0, engine_max = 0, engine_mean = 0;
  // Half the range relative to the mean, (max - min) / 2 / mean: 0 for one run; nullopt when the
  // mean is 0 or no run has a value.
  std::optional<double> spread_rel;
  std::optional<double> simulated;
  // (simulated - engine mean) / engine mean, signed (> 0: the simulation is slow / high); nullopt
  // when either side has no value or the mean is 0.
  std::optional<double> error_rel;
  bool within_spread = false;  // engine_min <= simulated <= engine_max
};

// The SLO rule of the knee: a point meets the SLOs when TTFT p99 <= ttft_ms and TPOT p99 <=
// tpot_ms; its margin is max(TTFT p99 / ttft_ms, TPOT p99 / tpot_ms) - 1 (<= 0: met; TPOT left
// out when it has no value; nullopt when TTFT has none, which fails).
struct SloLimits {
  double ttft_ms = 0;  // > 0
  double tpot_ms = 0;  // > 0
};

struct LoadPointComparison {
  std::string trace;
  std::vector<std::string> engine_dirs;
  std::string simulated_dir;
  int64_t num_arrived = 0;
  double offered_rate_per_s = 0;  // of the engine's first run (every run serves the same trace)
  std::vector<MetricComparison> metrics;  // ServingMetric order
  std::optional<double> measured_slo_margin, predicted_slo_margin;
  bool measured_meets_slo = false, predicted_meets_slo = false;
  bool below_knee = false;  // offered rate <= the measured knee
};

// The knee: in offered-rate order, the first point that fails the SLOs and the one before it;
// the rate where the margin crosses 0 by linear interpolation between the two. Without a failing
// point the knee is above the highest rate (rate_per_s nullopt, above_all); with the first point
// failing it is below the lowest (below_all).
struct KneeEstimate {
  std::optional<double> rate_per_s;
  bool above_all = false;
  bool below_all = false;
  std::string rule;  // how it was found, one line
};

// A metric's errors over the points on one side of the measured knee.
struct ErrorSide {
  int64_t num_points = 0;  // with an error
  double mean_abs_error_rel = 0;
  double max_abs_error_rel = 0;
  double mean_error_rel = 0;  // signed
  int64_t num_within_spread = 0;
};

struct MetricErrorSplit {
  ServingMetric metric{};
  ErrorSide below, above;
};

struct ServingComparison {
  std::string scenario;
  SloLimits slo;
  std::vector<LoadPointComparison> points;  // by offered rate
  KneeEstimate measured_knee, predicted_knee;
  std::optional<double> knee_error_rel;  // predicted / measured - 1 when both are bracketed
  std::vector<MetricErrorSplit> splits;  // ServingMetric order
};

// One load point's runs: the engine's repeats of a trace and the re-simulation of it.
struct LoadPointRuns {
  std::vector<ServingRun> engine;  // >= 1
  ServingRun simulated;
};

// Compares every load point (any order; sorted by offered rate). Precondition: every point has
// at least one engine run; slo limits > 0.
ServingComparison compare_serving(const std::vector<LoadPointRuns>& points, const SloLimits& slo);

// The knee over (rate, margin) pairs sorted by rate (exposed for tests).
KneeEstimate find_knee(const std::vector<double>& rates_per_s,
                       const std::vector<std::optional<double>>& margins);

}  // namespace moesim::sim
