#include "sim/calibration/serving_comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "base/check.h"
#include "sim/metrics/run_metrics.h"

namespace moesim::sim {
namespace {

struct MetricInfo {
  const char* name;
  const char* unit;
};

constexpr std::array<MetricInfo, kNumServingMetrics> kMetrics = {{
    {"ttft_p50_ms", "ms"},
    {"ttft_p90_ms", "ms"},
    {"ttft_p99_ms", "ms"},
    {"tpot_p50_ms", "ms"},
    {"tpot_p90_ms", "ms"},
    {"tpot_p99_ms", "ms"},
    {"e2e_p50_ms", "ms"},
    {"e2e_p90_ms", "ms"},
    {"e2e_p99_ms", "ms"},
    {"queueing_p50_ms", "ms"},
    {"queueing_p90_ms", "ms"},
    {"queueing_p99_ms", "ms"},
    {"output_tokens_per_s", "tokens/s"},
    {"preemptions", "count"},
    {"completed", "count"},
}};

size_t idx(ServingMetric m) { return static_cast<size_t>(m); }

// p50, p90, p99 of `values` into the three metrics from `first`.
void put_percentiles(std::vector<double> values, ServingMetric first, ServingFigures& f) {
  if (values.empty()) return;
  const Percentiles p = percentiles(std::move(values));
  f.values[idx(first)] = p.p50;
  f.values[idx(first) + 1] = p.p90;
  f.values[idx(first) + 2] = p.p99;
}

std::optional<double> value_of(const ServingFigures& f, ServingMetric m) {
  return f.values[idx(m)];
}

std::optional<double> slo_margin(const ServingFigures& f, const SloLimits& slo) {
  const std::optional<double> ttft = value_of(f, ServingMetric::kTtftP99);
  if (!ttft) return std::nullopt;
  double margin = *ttft / slo.ttft_ms - 1;
  if (const std::optional<double> tpot = value_of(f, ServingMetric::kTpotP99)) {
    margin = std::max(margin, *tpot / slo.tpot_ms - 1);
  }
  return margin;
}

// The engine runs' mean of every metric (over the runs that have it): the measured figures.
ServingFigures mean_figures(const std::vector<ServingFigures>& runs) {
  ServingFigures mean = runs.front();
  for (int m = 0; m < kNumServingMetrics; ++m) {
    double sum = 0;
    int64_t n = 0;
    for (const ServingFigures& r : runs) {
      if (!r.values[m]) continue;
      sum += *r.values[m];
      ++n;
    }
    mean.values[m] = n > 0 ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt;
  }
  return mean;
}

MetricComparison compare_metric(ServingMetric metric, const std::vector<ServingFigures>& engine,
                                const ServingFigures& simulated) {
  MetricComparison c;
  c.metric = metric;
  for (const ServingFigures& r : engine) {
    if (const std::optional<double> v = value_of(r, metric)) c.engine.push_back(*v);
  }
  c.simulated = value_of(simulated, metric);
  if (c.engine.empty()) return c;
  c.engine_min = *std::min_element(c.engine.begin(), c.engine.end());
  c.engine_max = *std::max_element(c.engine.begin(), c.engine.end());
  c.engine_mean =
      std::accumulate(c.engine.begin(), c.engine.end(), 0.0) / static_cast<double>(c.engine.size());
  if (c.engine_mean != 0) {
    c.spread_rel = (c.engine_max - c.engine_min) / 2 / std::abs(c.engine_mean);
    if (c.simulated) c.error_rel = (*c.simulated - c.engine_mean) / std::abs(c.engine_mean);
  }
  c.within_spread = c.simulated && *c.simulated >= c.engine_min && *c.simulated <= c.engine_max;
  return c;
}

void add_to_side(const MetricComparison& c, ErrorSide& side) {
  if (!c.error_rel) return;
  const double e = *c.error_rel;
  const double n = static_cast<double>(side.num_points);
  side.mean_abs_error_rel = (side.mean_abs_error_rel * n + std::abs(e)) / (n + 1);
  side.mean_error_rel = (side.mean_error_rel * n + e) / (n + 1);
  side.max_abs_error_rel = std::max(side.max_abs_error_rel, std::abs(e));
  side.num_within_spread += c.within_spread;
  ++side.num_points;
}

std::string rate_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", r);
  return buf;
}

}  // namespace

const char* serving_metric_name(ServingMetric m) { return kMetrics[idx(m)].name; }
const char* serving_metric_unit(ServingMetric m) { return kMetrics[idx(m)].unit; }

ServingFigures serving_figures(const ServingRun& run) {
  ServingFigures f;
  std::vector<double> ttft, tpot, e2e, queueing;
  int64_t first_arrival_ns = std::numeric_limits<int64_t>::max(), last_arrival_ns = 0;
  int64_t last_done_ns = -1, output_tokens = 0, preemptions = 0, completed = 0;
  for (const ServedRequest& r : run.requests) {
    ++f.num_arrived;
    first_arrival_ns = std::min(first_arrival_ns, r.arrival_ns);
    last_arrival_ns = std::max(last_arrival_ns, r.arrival_ns);
    preemptions += r.preemptions;
    if (r.outcome != ServedOutcome::kCompleted) continue;
    ++completed;
    output_tokens += r.generated_tokens;
    last_done_ns = std::max(last_done_ns, r.done_ns);
    if (r.ttft_ms) ttft.push_back(*r.ttft_ms);
    if (r.tpot_ms) tpot.push_back(*r.tpot_ms);
    if (r.e2e_ms) e2e.push_back(*r.e2e_ms);
    if (r.queueing_ms) queueing.push_back(*r.queueing_ms);
  }
  put_percentiles(std::move(ttft), ServingMetric::kTtftP50, f);
  put_percentiles(std::move(tpot), ServingMetric::kTpotP50, f);
  put_percentiles(std::move(e2e), ServingMetric::kE2eP50, f);
  put_percentiles(std::move(queueing), ServingMetric::kQueueingP50, f);
  if (completed > 0 && last_done_ns > first_arrival_ns) {
    f.values[idx(ServingMetric::kOutputTokensPerS)] =
        static_cast<double>(output_tokens) * kNsPerS /
        static_cast<double>(last_done_ns - first_arrival_ns);
  }
  f.values[idx(ServingMetric::kPreemptions)] = static_cast<double>(preemptions);
  f.values[idx(ServingMetric::kCompleted)] = static_cast<double>(completed);
  if (f.num_arrived >= 2 && last_arrival_ns > first_arrival_ns) {
    f.offered_rate_per_s = static_cast<double>(f.num_arrived - 1) * kNsPerS /
                           static_cast<double>(last_arrival_ns - first_arrival_ns);
  }
  return f;
}

KneeEstimate find_knee(const std::vector<double>& rates_per_s,
                       const std::vector<std::optional<double>>& margins) {
  MOESIM_CHECK(rates_per_s.size() == margins.size(), "one margin per rate");
  KneeEstimate k;
  size_t first_fail = margins.size();
  for (size_t i = 0; i < margins.size(); ++i) {
    if (!margins[i] || *margins[i] > 0) {
      first_fail = i;
      break;
    }
  }
  if (first_fail == margins.size()) {
    k.above_all = true;
    k.rule = "every load point meets the SLOs: the knee is above the highest rate";
    return k;
  }
  if (first_fail == 0) {
    k.below_all = true;
    k.rule = "the lowest load point misses the SLOs: the knee is below the lowest rate";
    return k;
  }
  const double r0 = rates_per_s[first_fail - 1], r1 = rates_per_s[first_fail];
  const double m0 = *margins[first_fail - 1];
  const std::optional<double> m1 = margins[first_fail];
  if (!m1) {
    k.rate_per_s = r0;
    k.rule = "last rate meeting the SLOs (" + rate_text(r0) + " req/s; the next, " + rate_text(r1) +
             " req/s, completed no request)";
    return k;
  }
  // m0 <= 0 < m1: the margin's zero crossing on the line between the two points.
  k.rate_per_s = r0 + (r1 - r0) * (0 - m0) / (*m1 - m0);
  k.rule = "SLO margin interpolated to 0 between " + rate_text(r0) + " req/s (met) and " +
           rate_text(r1) + " req/s (missed)";
  return k;
}

ServingComparison compare_serving(const std::vector<LoadPointRuns>& points, const SloLimits& slo) {
  MOESIM_CHECK(slo.ttft_ms > 0 && slo.tpot_ms > 0, "SLO limits must be positive");
  ServingComparison out;
  out.slo = slo;
  std::vector<ServingFigures> measured, predicted;
  for (const LoadPointRuns& p : points) {
    MOESIM_CHECK(!p.engine.empty(), "a load point without engine runs");
    std::vector<ServingFigures> engine;
    LoadPointComparison c;
    c.trace = p.engine.front().trace;
    for (const ServingRun& r : p.engine) {
      engine.push_back(serving_figures(r));
      c.engine_dirs.push_back(r.dir);
    }
    c.simulated_dir = p.simulated.dir;
    const ServingFigures sim = serving_figures(p.simulated);
    c.num_arrived = engine.front().num_arrived;
    c.offered_rate_per_s = engine.front().offered_rate_per_s;
    for (int m = 0; m < kNumServingMetrics; ++m) {
      c.metrics.push_back(compare_metric(static_cast<ServingMetric>(m), engine, sim));
    }
    measured.push_back(mean_figures(engine));
    predicted.push_back(sim);
    c.measured_slo_margin = slo_margin(measured.back(), slo);
    c.predicted_slo_margin = slo_margin(sim, slo);
    c.measured_meets_slo = c.measured_slo_margin && *c.measured_slo_margin <= 0;
    c.predicted_meets_slo = c.predicted_slo_margin && *c.predicted_slo_margin <= 0;
    out.points.push_back(std::move(c));
  }
  std::stable_sort(out.points.begin(), out.points.end(),
                   [](const LoadPointComparison& a, const LoadPointComparison& b) {
                     return a.offered_rate_per_s < b.offered_rate_per_s;
                   });
  std::vector<double> rates;
  std::vector<std::optional<double>> measured_margins, predicted_margins;
  for (const LoadPointComparison& c : out.points) {
    rates.push_back(c.offered_rate_per_s);
    measured_margins.push_back(c.measured_slo_margin);
    predicted_margins.push_back(c.predicted_slo_margin);
  }
  out.measured_knee = find_knee(rates, measured_margins);
  out.predicted_knee = find_knee(rates, predicted_margins);
  if (out.measured_knee.rate_per_s && out.predicted_knee.rate_per_s &&
      *out.measured_knee.rate_per_s > 0) {
    out.knee_error_rel = *out.predicted_knee.rate_per_s / *out.measured_knee.rate_per_s - 1;
  }
  for (LoadPointComparison& c : out.points) {
    c.below_knee =
        out.measured_knee.above_all ||
        (out.measured_knee.rate_per_s && c.offered_rate_per_s <= *out.measured_knee.rate_per_s);
  }
  for (int m = 0; m < kNumServingMetrics; ++m) {
    MetricErrorSplit s;
    s.metric = static_cast<ServingMetric>(m);
    for (const LoadPointComparison& c : out.points) {
      add_to_side(c.metrics[static_cast<size_t>(m)], c.below_knee ? s.below : s.above);
    }
    out.splits.push_back(s);
  }
  return out;
}

}  // namespace moesim::sim
