// Percentile bootstrap confidence intervals, drawn from the project's own RNG so that intervals
// are the same on every machine: resample the n units (requests, or replications) with
// replacement, recompute the statistics on each resample, and take the (1 - c) / 2 and
// (1 + c) / 2 quantiles of the resampled values.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace moesim::sim::study {

struct ConfidenceInterval {
  double estimate = 0;  // the statistic on the original sample
  double lo = 0;
  double hi = 0;
};

struct BootstrapOptions {
  int32_t num_resamples = 1000;  // >= 1
  double confidence = 0.95;      // in (0, 1)
  uint64_t seed = 1;             // root seed of the stream "study.bootstrap"
};

// Computes `num_stats` statistics of a sample: fn(indices, values_out) writes the statistics of
// the units at `indices` (each in [0, n), repeats allowed) to values_out (num_stats values).
using StatisticsFn = std::function<void(std::span<const int64_t>, std::span<double>)>;

// Intervals for num_stats statistics over n >= 1 units, all from the same resamples (so the
// intervals of related statistics are consistent). Deterministic for a given seed. A statistic
// may be NaN where a sample has no data for it (a TPOT percentile over requests none of which
// completed): its NaN resamples are left out of its interval, and lo and hi are NaN when every
// resample is.
std::vector<ConfidenceInterval> bootstrap_cis(int64_t n, int32_t num_stats, const StatisticsFn& fn,
                                              const BootstrapOptions& options);

// Linear interpolation between closest ranks of sorted values (numpy's default); q in [0, 1].
// Precondition: `sorted` is non-empty and sorted.
double quantile_sorted(std::span<const double> sorted, double q);

}  // namespace moesim::sim::study
