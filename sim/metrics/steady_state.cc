#include "sim/metrics/steady_state.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <cstdio>

#include "base/check.h"

namespace moesim::sim {
namespace {

std::string percent_text(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100 * fraction);
  return buf;
}

// Mean of the first (or last) tenth of `v` (at least one value); 0 when empty.
double tenth_mean(const std::vector<double>& v, bool last) {
  if (v.empty()) return 0;
  const size_t n = std::max<size_t>(1, v.size() / 10);
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += last ? v[v.size() - 1 - i] : v[i];
  return s / static_cast<double>(n);
}

std::string count_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", x);
  return buf;
}

}  // namespace

SystemSeries::SystemSeries(SimTime run_ns)
    : bin_ns_(std::max<SimTime>(1, (run_ns + kBinsPerRun - 1) / kBinsPerRun)) {
  MOESIM_CHECK(run_ns > 0, "system series: a run of no time");
  grow(kBinsPerRun);
}

void SystemSeries::grow(size_t bins) {
  if (bins <= tokens_.size()) return;
  in_system_ns_.resize(bins, 0.0);
  tokens_.resize(bins, 0.0);
}

void SystemSeries::advance(SimTime now) {
  if (now <= last_ns_) return;
  const auto last_bin = static_cast<size_t>((now - 1) / bin_ns_);
  if (last_bin >= tokens_.size()) grow(last_bin + 1);
  if (in_system_ == 0) {
    last_ns_ = now;
    return;
  }
  const auto n = static_cast<double>(in_system_);
  while (last_ns_ < now) {
    const auto bin = static_cast<size_t>(last_ns_ / bin_ns_);
    const SimTime seg_end = std::min<SimTime>(now, static_cast<SimTime>(bin + 1) * bin_ns_);
    in_system_ns_[bin] += n * static_cast<double>(seg_end - last_ns_);
    last_ns_ = seg_end;
  }
}

std::vector<double> SystemSeries::means(const std::vector<SumCount>& v, SimTime from_ns) const {
  std::vector<double> out;
  for (auto i = static_cast<size_t>(std::max<SimTime>(0, from_ns) / segment_ns()); i < v.size();
       ++i) {
    if (v[i].count > 0) out.push_back(v[i].sum / static_cast<double>(v[i].count));
  }
  return out;
}

MserCut mser5(const std::vector<double>& series) {
  MserCut cut;
  const auto m = static_cast<int64_t>(series.size()) / SystemSeries::kMserBatch;
  if (m < 2) return cut;
  std::vector<double> batch(static_cast<size_t>(m));
  for (int64_t b = 0; b < m; ++b) {
    double sum = 0;
    for (int64_t i = 0; i < SystemSeries::kMserBatch; ++i) {
      sum += series[static_cast<size_t>(b * SystemSeries::kMserBatch + i)];
    }
    batch[static_cast<size_t>(b)] = sum / SystemSeries::kMserBatch;
  }
  // MSER(d) = sum over the kept batches of (x - mean)^2 / (m - d)^2, for d = 0 .. m / 2, from the
  // suffix sums (a two-pass form per d would be quadratic).
  const int64_t last = m / 2;
  double best = 0;
  double sum = 0, sum_sq = 0;
  std::vector<double> mser(static_cast<size_t>(last + 1));
  for (int64_t d = m - 1; d >= 0; --d) {
    const double x = batch[static_cast<size_t>(d)];
    sum += x;
    sum_sq += x * x;
    if (d > last) continue;
    const auto kept = static_cast<double>(m - d);
    const double sse = std::max(0.0, sum_sq - sum * sum / kept);
    mser[static_cast<size_t>(d)] = sse / (kept * kept);
  }
  int64_t arg = 0;
  best = mser[0];
  for (int64_t d = 1; d <= last; ++d) {
    // Strictly smaller: ties keep the earlier cut (less data dropped).
    if (mser[static_cast<size_t>(d)] < best) {
      best = mser[static_cast<size_t>(d)];
      arg = d;
    }
  }
  cut.batches_dropped = arg;
  cut.found = arg < last;
  return cut;
}

std::optional<double> means_rel_half_width(const std::vector<double>& means) {
  const auto k = static_cast<double>(means.size());
  if (means.size() < 2) return std::nullopt;
  double mean = 0;
  for (double x : means) mean += x;
  mean /= k;
  if (!(std::abs(mean) > 0)) return std::nullopt;
  double ss = 0;
  for (double x : means) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / (k - 1));
  const boost::math::students_t t_dist(k - 1);
  const double t = boost::math::quantile(boost::math::complement(t_dist, 0.025));
  return t * sd / std::sqrt(k) / std::abs(mean);
}

std::optional<double> batch_means_rel_half_width(const std::vector<double>& values) {
  const int64_t k = SystemSeries::kNumBatches;
  const auto n = static_cast<int64_t>(values.size());
  if (n < k) return std::nullopt;
  const int64_t per = n / k, skip = n - per * k;
  std::vector<double> means(static_cast<size_t>(k), 0.0);
  for (int64_t b = 0; b < k; ++b) {
    double s = 0;
    for (int64_t i = 0; i < per; ++i) s += values[static_cast<size_t>(skip + b * per + i)];
    means[static_cast<size_t>(b)] = s / static_cast<double>(per);
  }
  return means_rel_half_width(means);
}

void judge_convergence(SteadyStateResult& r, const std::vector<double>& ttft_means,
                       const std::vector<double>& tpot_means, const SteadyStateSpec& spec) {
  r.converged = false;
  r.reason.clear();
  if (r.terminating) {
    r.converged = true;
    return;
  }
  if (!r.steady) {
    r.reason = r.trend;
    return;
  }
  const auto needed = static_cast<size_t>(SystemSeries::kNumBatches);
  r.ttft_rel_half_width = means_rel_half_width(ttft_means);
  r.tpot_rel_half_width = means_rel_half_width(tpot_means);
  if (ttft_means.size() < needed || tpot_means.size() < needed) {
    const bool ttft = ttft_means.size() < needed;
    r.reason = "too few measured requests " +
               std::string(ttft ? "with a first token"
                                : "completed (they take longer than the "
                                  "window)") +
               ": " + std::to_string(ttft ? ttft_means.size() : tpot_means.size()) + " of the " +
               std::to_string(needed) + " segments needed have one: run longer";
    return;
  }
  const double h = spec.max_rel_half_width;
  const double a = r.ttft_rel_half_width.value_or(0), b = r.tpot_rel_half_width.value_or(0);
  if (a > h || b > h) {
    r.reason = "95% half-widths of the batch means TTFT " + percent_text(a) + ", TPOT " +
               percent_text(b) + ", above " + percent_text(h) + ": run longer";
    return;
  }
  r.converged = true;
}

SimTime SystemSeries::max_auto_warmup_ns(SimTime end_ns) const {
  // As analyse(): MSER-5 over the full bins drops at most half of its batches.
  const int64_t batches = end_ns / bin_ns_ / kMserBatch;
  const int64_t cut_bins =
      (batches / 2 * kMserBatch + kBinsPerSegment - 1) / kBinsPerSegment * kBinsPerSegment;
  return std::min<SimTime>(end_ns, cut_bins * bin_ns_);
}

SteadyStateResult SystemSeries::analyse(SimTime end_ns, const SteadyStateSpec& spec,
                                        std::optional<SimTime> arrivals_end_ns) {
  advance(end_ns);
  SteadyStateResult r;
  if (arrivals_end_ns && *arrivals_end_ns < end_ns - segment_ns()) {
    r.terminating = true;
    r.steady = true;
    r.auto_warmup = !spec.warmup_s;
    if (spec.warmup_s) {
      r.warmup_ns = std::min<SimTime>(
          end_ns, (from_seconds(*spec.warmup_s) + segment_ns() - 1) / segment_ns() * segment_ns());
    }
    return r;
  }
  const auto full_bins = static_cast<size_t>(end_ns / bin_ns_);
  std::vector<double> in_system(full_bins), tokens_per_s(full_bins);
  const double bin_s = to_seconds(bin_ns_);
  for (size_t i = 0; i < full_bins; ++i) {
    in_system[i] = in_system_ns_[i] / static_cast<double>(bin_ns_);
    tokens_per_s[i] = tokens_[i] / bin_s;
  }
  int64_t cut_bins = 0;
  if (spec.warmup_s) {
    r.auto_warmup = false;
    r.steady = true;
    const SimTime w = from_seconds(*spec.warmup_s);
    // Up to the next segment boundary: the measured requests are whole segments.
    cut_bins = (w + segment_ns() - 1) / segment_ns() * kBinsPerSegment;
  } else {
    const MserCut cut = mser5(in_system);
    r.steady = cut.found;
    cut_bins = (cut.batches_dropped * kMserBatch + kBinsPerSegment - 1) / kBinsPerSegment *
               kBinsPerSegment;
  }
  r.warmup_ns = std::min<SimTime>(end_ns, cut_bins * bin_ns_);
  const auto from = static_cast<size_t>(std::min<int64_t>(cut_bins, full_bins));
  const std::vector<double> measured_n(in_system.begin() + from, in_system.end());
  const std::vector<double> measured_tok(tokens_per_s.begin() + from, tokens_per_s.end());
  double n_sum = 0;
  for (double x : measured_n) n_sum += x;
  if (!measured_n.empty()) r.mean_in_system = n_sum / static_cast<double>(measured_n.size());
  r.concurrency_rel_half_width = batch_means_rel_half_width(measured_n);
  r.throughput_rel_half_width = batch_means_rel_half_width(measured_tok);
  if (!r.steady) {
    r.trend = "no steady state: the requests in the system still trend at the run's end (" +
              count_text(tenth_mean(in_system, false)) + " in the first tenth, " +
              count_text(tenth_mean(in_system, true)) +
              " in the last): run longer or at a lower rate";
  }
  return r;
}

}  // namespace moesim::sim
