// Replications of one run (`moesim run --replications N`): the same scenario with seeds s, s + 1,
// ..., s + N - 1, and for each headline figure its mean over the seeds with a Student-t 95%
// interval (the runs are independent: each seed draws every named RNG stream afresh). A figure a
// run has no data for (TPOT when nothing completed) is left out of that figure's mean; the count
// says over how many runs it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/metrics/run_metrics.h"

namespace moesim::sim::study {

struct FigureInterval {
  std::string name;  // ttft_p99_ms, output_tokens_per_s, ...
  std::string unit;
  double mean = 0, lo = 0, hi = 0;  // lo == hi == mean with fewer than two values
  int32_t count = 0;                // runs with the figure
};

// ttft_p50_ms, ttft_p99_ms, tpot_p50_ms, tpot_p99_ms, output_tokens_per_s, requests_per_s,
// goodput_req_per_s, slo_attainment over `runs` (>= 1).
std::vector<FigureInterval> figure_intervals(const std::vector<const RunSummary*>& runs);

}  // namespace moesim::sim::study
