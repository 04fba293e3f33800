#include "sim/workload/trace_fit.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "base/check.h"

namespace moesim::sim {
namespace {

constexpr int64_t kMinSampleRequests = 10'000;
constexpr int64_t kMinLaps = 2;  // so that the loop's figures cross a seam
constexpr int64_t kMaxLaps = 100;

double mean_of(const std::vector<double>& x) {
  return x.empty() ? 0.0 : std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const double mx = mean_of(x), my = mean_of(y);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

std::vector<double> gaps_s(const std::vector<TraceDraw>& d) {
  std::vector<double> g;
  for (size_t i = 1; i < d.size(); ++i)
    g.push_back(to_seconds(d[i].arrival_ns - d[i - 1].arrival_ns));
  return g;
}

std::optional<double> block_hit_rate(const std::vector<TraceDraw>& sample) {
  std::unordered_set<uint64_t> seen;  // lookups only
  int64_t hits = 0, blocks = 0;
  for (const TraceDraw& d : sample) {
    size_t n = 0;
    while (n < d.hash_ids.size() && seen.count(d.hash_ids[n]) > 0) ++n;
    hits += static_cast<int64_t>(n);
    blocks += static_cast<int64_t>(d.hash_ids.size());
    seen.insert(d.hash_ids.begin(), d.hash_ids.end());
  }
  if (blocks == 0) return std::nullopt;
  return static_cast<double>(hits) / static_cast<double>(blocks);
}

TraceSampleStats stats_of(const std::vector<TraceDraw>& d) {
  TraceSampleStats s;
  s.num_requests = static_cast<int64_t>(d.size());
  const std::vector<double> g = gaps_s(d);
  const double mean_gap = mean_of(g);
  if (mean_gap > 0) {
    s.rate_per_s = static_cast<double>(d.size()) /
                   (to_seconds(d.back().arrival_ns - d.front().arrival_ns) + mean_gap);
    double ss = 0;
    for (double v : g) ss += (v - mean_gap) * (v - mean_gap);
    s.gap_cv = std::sqrt(ss / static_cast<double>(g.size())) / mean_gap;
    s.gap_lag1 = g.size() > 2 ? correlation({g.begin(), g.end() - 1}, {g.begin() + 1, g.end()}) : 0;
  }
  std::vector<double> prompt, output, log_prompt, log_output;
  for (const TraceDraw& r : d) {
    prompt.push_back(static_cast<double>(r.input_tokens));
    output.push_back(static_cast<double>(r.output_tokens));
    log_prompt.push_back(std::log(prompt.back()));
    log_output.push_back(std::log(output.back()));
  }
  s.mean_prompt_tokens = mean_of(prompt);
  s.mean_output_tokens = mean_of(output);
  s.log_length_corr = correlation(log_prompt, log_output);
  s.block_hit_rate = block_hit_rate(d);
  return s;
}

// The window's rows over `num_laps` laps; private ids fresh per lap unless `keep_all_ids`.
std::vector<TraceDraw> loop_sample(const std::vector<TraceRecord>& rows, const TraceWindow& w,
                                   int64_t num_laps, bool keep_all_ids) {
  const std::vector<uint64_t> shared = shared_hash_ids(rows, w);
  const uint64_t stride = hash_id_bound(rows, w);
  std::vector<TraceDraw> out;
  for (int64_t lap = 0; lap < num_laps; ++lap) {
    for (size_t i = w.begin_idx; i < w.end_idx; ++i) {
      TraceDraw& d = out.emplace_back();
      d.arrival_ns = rows[i].timestamp_ns - w.start_ns + lap * w.period_ns;
      d.input_tokens = rows[i].input_tokens;
      d.output_tokens = rows[i].output_tokens;
      d.hash_ids = rows[i].hash_ids;
      if (keep_all_ids) continue;
      for (uint64_t& h : d.hash_ids) {
        if (!std::binary_search(shared.begin(), shared.end(), h)) {
          h += static_cast<uint64_t>(lap) * stride;
        }
      }
    }
  }
  return out;
}

}  // namespace

double ks_distance(std::vector<double> a, std::vector<double> b) {
  if (a.empty() || b.empty()) return 0.0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    const double x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] <= x) ++i;
    while (j < b.size() && b[j] <= x) ++j;
    d = std::max(d, std::abs(static_cast<double>(i) / static_cast<double>(a.size()) -
                             static_cast<double>(j) / static_cast<double>(b.size())));
  }
  return d;
}

TraceFitReport fit_trace(const std::vector<TraceRecord>& rows, const TraceWindow& window,
                         uint64_t seed) {
  MOESIM_CHECK(window.period_ns > 0, "trace fit of a window without a lap length");
  TraceFitReport r;
  r.window = window;
  r.model = fit_trace_model(rows, window);
  const auto n = static_cast<int64_t>(window.num_rows());
  r.num_laps = std::clamp<int64_t>((kMinSampleRequests + n - 1) / n, kMinLaps, kMaxLaps);

  const std::vector<TraceDraw> trace = loop_sample(rows, window, 1, true);
  r.trace = stats_of(trace);
  std::vector<TraceDraw> model;
  TraceModelSampler sampler(r.model, 1.0);
  RngStream rng(seed, "workload");
  while (static_cast<int64_t>(model.size()) < n * r.num_laps) {
    std::optional<TraceDraw> d = sampler.next(rng);
    if (!d) break;
    model.push_back(std::move(*d));
  }
  r.model_sample = stats_of(model);
  r.ks_gap = ks_distance(gaps_s(trace), gaps_s(model));
  auto lengths = [](const std::vector<TraceDraw>& d, bool prompt) {
    std::vector<double> v;
    for (const TraceDraw& x : d) {
      v.push_back(static_cast<double>(prompt ? x.input_tokens : x.output_tokens));
    }
    return v;
  };
  r.ks_prompt = ks_distance(lengths(trace, true), lengths(model, true));
  r.ks_output = ks_distance(lengths(trace, false), lengths(model, false));
  r.loop_block_hit_rate = block_hit_rate(loop_sample(rows, window, r.num_laps, false));
  r.loop_all_ids_kept_block_hit_rate = block_hit_rate(loop_sample(rows, window, r.num_laps, true));
  return r;
}

}  // namespace moesim::sim
