#include "sim/serving/fidelity_check.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/metrics/run_metrics.h"

namespace moesim::sim {

FidelityAgreement fidelity_agreement(std::span<const FidelitySample> samples, int64_t skipped) {
  FidelityAgreement a;
  a.skipped = skipped;
  a.count = static_cast<int64_t>(samples.size());
  if (samples.empty()) return a;
  std::vector<double> exact, fast;
  int64_t fast_layers = 0, layers = 0;
  for (const FidelitySample& s : samples) {
    exact.push_back(to_seconds(s.exact_ns) * 1e3);
    fast.push_back(to_seconds(s.fast_ns) * 1e3);
    if (s.exact_ns > 0) {
      a.max_step_rel = std::max(
          a.max_step_rel,
          std::abs(static_cast<double>(s.fast_ns) / static_cast<double>(s.exact_ns) - 1.0));
    }
    fast_layers += s.fast_layers;
    layers += s.fast_layers + s.exact_layers;
  }
  const Percentiles e = percentiles(std::move(exact));
  const Percentiles f = percentiles(std::move(fast));
  auto rel = [](double fast_v, double exact_v) { return exact_v > 0 ? fast_v / exact_v - 1 : 0; };
  a.exact_mean_ms = e.mean;
  a.fast_mean_ms = f.mean;
  a.exact_p50_ms = e.p50;
  a.fast_p50_ms = f.p50;
  a.exact_p99_ms = e.p99;
  a.fast_p99_ms = f.p99;
  a.mean_rel = rel(f.mean, e.mean);
  a.p50_rel = rel(f.p50, e.p50);
  a.p99_rel = rel(f.p99, e.p99);
  a.fast_layer_share =
      layers > 0 ? static_cast<double>(fast_layers) / static_cast<double>(layers) : 0.0;
  return a;
}

}  // namespace moesim::sim
