// Error statistics of simulated (predicted) against measured values: the numbers every
// calibration and validation report quotes. Relative error = (simulated - measured) / measured.
#pragma once

#include <cstdint>
#include <span>

namespace moesim::sim {

struct ErrorStats {
  int64_t num_samples = 0;
  double mape = 0;               // mean |relative error| (a fraction: 0.05 = 5%)
  double p50_abs_rel_error = 0;  // median |relative error|
  double p99_abs_rel_error = 0;
  double p50_abs_error_s = 0;  // median |simulated - measured|, seconds
  double p99_abs_error_s = 0;
  double rms_abs_error_s = 0;
  double max_abs_error_s = 0;
  double mean_rel_error = 0;  // signed: > 0 means the simulation is slow
  double pearson_r = 0;       // 0 when either side is constant
  double r2 = 0;              // 1 - SS_res / SS_tot of measured; 0 when measured is constant
  double measured_sum = 0;
  double simulated_sum = 0;
};

// Statistics over pairs (measured[i], simulated[i]); pairs with measured <= 0 count in the sums
// and absolute errors but not in the relative ones. Precondition: equal sizes.
ErrorStats compute_error_stats(std::span<const double> measured, std::span<const double> simulated);

// Nearest-rank quantile q in [0, 1] of `values` (copied and sorted); 0 for an empty span.
double quantile(std::span<const double> values, double q);

}  // namespace moesim::sim
