// Goodness of fit of a trace model (trace_model.h) and of a trace loop against the trace window
// they come from (`moesim trace-fit`, docs/workload.md).
//
// The model generates the window's rows x laps requests (laps: at least 2, and enough for
// 10,000 requests) at its own rate, from a fixed seed. The two samples are compared by two-sample
// Kolmogorov-Smirnov distances (sup |F_trace - F_model|) of the request inter-arrival gaps and of
// the prompt and output lengths, by the lag-1 autocorrelation of the gaps and the correlation of
// log prompt and log output lengths, and by the prefix-block hit rate an unbounded cache would
// see (Mooncake). The loop's hit rate over the same laps, with and without fresh private ids,
// shows what the shared-id rule (trace_window.h) keeps and what it prevents.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/workload/trace_model.h"
#include "sim/workload/trace_record.h"
#include "sim/workload/trace_window.h"

namespace moesim::sim {

struct TraceSampleStats {
  int64_t num_requests = 0;
  double rate_per_s = 0;  // requests over the sample's span (first to last arrival + mean gap)
  double gap_cv = 0;      // coefficient of variation of the inter-arrival gaps
  double gap_lag1 = 0;    // lag-1 autocorrelation of the gaps
  double mean_prompt_tokens = 0;
  double mean_output_tokens = 0;
  double log_length_corr = 0;  // Pearson correlation of ln prompt and ln output tokens
  // Leading prompt blocks found in an unbounded cache of every earlier request's blocks, over all
  // prompt blocks; absent without hash ids.
  std::optional<double> block_hit_rate;
};

struct TraceFitReport {
  TraceWindow window;
  TraceModel model;
  int64_t num_laps = 1;  // laps' worth of requests in the model and loop samples
  TraceSampleStats trace;
  TraceSampleStats model_sample;
  double ks_gap = 0;
  double ks_prompt = 0;
  double ks_output = 0;
  // The loop over num_laps laps: private ids fresh per lap (the rule) and all ids kept.
  std::optional<double> loop_block_hit_rate;
  std::optional<double> loop_all_ids_kept_block_hit_rate;
};

// Fits the model to the window and measures the fit with the model's stream `seed`.
// Precondition (checked): the window has a lap length.
TraceFitReport fit_trace(const std::vector<TraceRecord>& rows, const TraceWindow& window,
                         uint64_t seed);

// Two-sample Kolmogorov-Smirnov distance; 0 when either sample is empty.
double ks_distance(std::vector<double> a, std::vector<double> b);

}  // namespace moesim::sim
