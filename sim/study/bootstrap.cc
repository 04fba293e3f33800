#include "sim/study/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "sim/core/rng.h"

namespace moesim::sim::study {

double quantile_sorted(std::span<const double> sorted, double q) {
  MOESIM_CHECK(!sorted.empty() && q >= 0 && q <= 1, "quantile of an empty sample or bad q");
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

std::vector<ConfidenceInterval> bootstrap_cis(int64_t n, int32_t num_stats, const StatisticsFn& fn,
                                              const BootstrapOptions& options) {
  MOESIM_CHECK(n >= 1 && num_stats >= 0 && options.num_resamples >= 1 && options.confidence > 0 &&
                   options.confidence < 1,
               "bootstrap preconditions");
  std::vector<ConfidenceInterval> cis(static_cast<size_t>(num_stats));
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::vector<double> values(static_cast<size_t>(num_stats));
  for (int64_t i = 0; i < n; ++i) indices[static_cast<size_t>(i)] = i;
  fn(indices, values);
  for (int32_t s = 0; s < num_stats; ++s) cis[static_cast<size_t>(s)].estimate = values[s];

  // resampled[s][r]: statistic s on resample r.
  std::vector<std::vector<double>> resampled(static_cast<size_t>(num_stats));
  for (auto& v : resampled) v.reserve(static_cast<size_t>(options.num_resamples));
  RngStream rng(options.seed, "study.bootstrap");
  for (int32_t r = 0; r < options.num_resamples; ++r) {
    for (int64_t& idx : indices)
      idx = static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(n)));
    fn(indices, values);
    for (int32_t s = 0; s < num_stats; ++s) resampled[static_cast<size_t>(s)].push_back(values[s]);
  }
  double tail = (1.0 - options.confidence) / 2.0;
  for (int32_t s = 0; s < num_stats; ++s) {
    std::vector<double>& v = resampled[static_cast<size_t>(s)];
    std::erase_if(v, [](double x) { return std::isnan(x); });
    if (v.empty()) {
      cis[static_cast<size_t>(s)].lo = cis[static_cast<size_t>(s)].hi =
          std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    std::sort(v.begin(), v.end());
    cis[static_cast<size_t>(s)].lo = quantile_sorted(v, tail);
    cis[static_cast<size_t>(s)].hi = quantile_sorted(v, 1.0 - tail);
  }
  return cis;
}

}  // namespace moesim::sim::study
