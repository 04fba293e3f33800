#include "sim/calibration/error_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"

namespace moesim::sim {

double quantile(std::span<const double> values, double q) {
  if (values.empty()) return 0.0;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  double rank = std::ceil(q * static_cast<double>(v.size()));
  size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(idx, v.size() - 1)];
}

ErrorStats compute_error_stats(std::span<const double> measured,
                               std::span<const double> simulated) {
  MOESIM_CHECK(measured.size() == simulated.size(), "error stats: size mismatch");
  ErrorStats e;
  const size_t n = measured.size();
  e.num_samples = static_cast<int64_t>(n);
  if (n == 0) return e;
  std::vector<double> abs_rel, abs_err;
  double sum_rel = 0, sum_sq = 0;
  for (size_t i = 0; i < n; ++i) {
    e.measured_sum += measured[i];
    e.simulated_sum += simulated[i];
    double err = simulated[i] - measured[i];
    abs_err.push_back(std::abs(err));
    sum_sq += err * err;
    e.max_abs_error_s = std::max(e.max_abs_error_s, std::abs(err));
    if (measured[i] > 0) {
      double rel = err / measured[i];
      abs_rel.push_back(std::abs(rel));
      sum_rel += rel;
    }
  }
  if (!abs_rel.empty()) {
    double s = 0;
    for (double x : abs_rel) s += x;
    e.mape = s / static_cast<double>(abs_rel.size());
    e.mean_rel_error = sum_rel / static_cast<double>(abs_rel.size());
    e.p50_abs_rel_error = quantile(abs_rel, 0.5);
    e.p99_abs_rel_error = quantile(abs_rel, 0.99);
  }
  e.p50_abs_error_s = quantile(abs_err, 0.5);
  e.p99_abs_error_s = quantile(abs_err, 0.99);
  e.rms_abs_error_s = std::sqrt(sum_sq / static_cast<double>(n));
  const double mean_m = e.measured_sum / static_cast<double>(n);
  const double mean_s = e.simulated_sum / static_cast<double>(n);
  double smm = 0, sss = 0, sms = 0;
  for (size_t i = 0; i < n; ++i) {
    smm += (measured[i] - mean_m) * (measured[i] - mean_m);
    sss += (simulated[i] - mean_s) * (simulated[i] - mean_s);
    sms += (measured[i] - mean_m) * (simulated[i] - mean_s);
  }
  e.pearson_r = smm > 0 && sss > 0 ? sms / std::sqrt(smm * sss) : 0.0;
  e.r2 = smm > 0 ? 1.0 - sum_sq / smm : 0.0;
  return e;
}

}  // namespace moesim::sim
