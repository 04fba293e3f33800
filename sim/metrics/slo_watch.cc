#include "sim/metrics/slo_watch.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "sim/metrics/figure_text.h"
#include "sim/metrics/request_stats.h"

namespace moesim::sim {
namespace {

std::string when_text(SimTime now) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.3f s", to_seconds(now));
  return buf;
}

std::string count_text(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

SloWatch::SloWatch(SloWatchLimits limits, int64_t max_requests, SimTime measured_from_ns)
    : limits_(std::move(limits)), max_requests_(max_requests), measured_from_ns_(measured_from_ns) {
  if (max_requests_ <= 0) return;  // no request: no sample, nothing to decide early
  if (limits_.min_attainment > 0) deadlines_.push_back({-1, limits_.ttft_ms, {}, {}});
  // Beyond the exact samples the summary's percentiles come from buckets: not watched.
  if (max_requests_ > static_cast<int64_t>(PercentileSketch::kExactSamples)) return;
  for (const SloWatchLimits::Percentile& p : limits_.percentiles) {
    if (p.metric == SloWatchLimits::Metric::kQueueing) continue;
    if (p.metric == SloWatchLimits::Metric::kTtft) {
      deadlines_.push_back({static_cast<int>(watched_.size()), p.limit_ms, {}, {}});
    }
    watched_.push_back({p, samples_above_for_certain(p.quantile, max_requests_), 0});
  }
}

int64_t SloWatch::samples_above_for_certain(double quantile, int64_t max_samples) {
  // percentiles(): position q (n - 1), value v[floor] + (v[floor + 1] - v[floor]) x fraction >=
  // v[floor], which is above the limit when the n - floor samples from it up are. n -
  // floor(q (n - 1)) grows by 0 or 1 with n, so its value at the largest n bounds every n.
  const auto lo = static_cast<int64_t>(std::floor(quantile * static_cast<double>(max_samples - 1)));
  return max_samples - lo;
}

void SloWatch::on_queued(int64_t key, SimTime arrival_ns) {
  if (failed() || arrival_ns < measured_from_ns_) return;
  for (Deadline& d : deadlines_) d.waiting.emplace(arrival_ns, key);
}

void SloWatch::on_time(SimTime now) {
  for (Deadline& d : deadlines_) {
    // Waiting in arrival order: the first has waited longest.
    while (!failed() && !d.waiting.empty() && to_ms(now - d.waiting.begin()->first) > d.limit_ms) {
      d.counted.insert(d.waiting.begin()->second);
      d.waiting.erase(d.waiting.begin());
      if (d.watched >= 0) {
        above(watched_[static_cast<size_t>(d.watched)], now);
      } else {
        miss(now);
      }
    }
  }
}

void SloWatch::on_first_token(const RequestRecord& r, SimTime now, int64_t key) {
  if (failed() || r.arrival_ns < measured_from_ns_) return;
  const double ttft_ms = to_ms(r.ttft_ns());
  // Whether on_time counted it already for the deadline of watched limit `w` (-1: the
  // attainment's); it waits no more either way.
  auto counted = [&](int w) {
    if (key < 0) return false;
    for (Deadline& d : deadlines_) {
      if (d.watched != w) continue;
      d.waiting.erase({r.arrival_ns, key});
      return d.counted.erase(key) > 0;
    }
    return false;
  };
  for (size_t i = 0; i < watched_.size(); ++i) {
    Watched& w = watched_[i];
    if (w.limit.metric != SloWatchLimits::Metric::kTtft) continue;
    if (!counted(static_cast<int>(i)) && ttft_ms > w.limit.limit_ms) above(w, now);
  }
  // Late: missed whether it completes (slo_status) or is in flight at the end (it waited longer).
  if (!counted(-1) && ttft_ms > limits_.ttft_ms) miss(now);
}

void SloWatch::on_complete(const RequestRecord& r, SimTime now) {
  if (failed() || r.arrival_ns < measured_from_ns_) return;
  sample(SloWatchLimits::Metric::kE2e, to_ms(r.e2e_ns()), now);
  const double tpot_ns = r.tpot_ns();
  if (tpot_ns >= 0) sample(SloWatchLimits::Metric::kTpot, tpot_ns / 1e6, now);
  // A late first token was counted as missed then.
  if (to_ms(r.ttft_ns()) <= limits_.ttft_ms && tpot_ns >= 0 && tpot_ns / 1e6 > limits_.tpot_ms) {
    miss(now);
  }
}

void SloWatch::on_reject(const RequestRecord& r, SimTime now) {
  if (failed() || r.arrival_ns < measured_from_ns_) return;
  miss(now);
}

void SloWatch::sample(SloWatchLimits::Metric metric, double value_ms, SimTime now) {
  for (Watched& w : watched_) {
    if (w.limit.metric == metric && value_ms > w.limit.limit_ms) above(w, now);
  }
}

void SloWatch::above(Watched& w, SimTime now) {
  if (++w.above < w.needed || failed()) return;
  failure_ = w.limit.name + " > " + number_text(w.limit.limit_ms) + " (decided early at " +
             when_text(now) + ": " + count_text(w.above, "sample", "samples") +
             " above the limit, of at most " + count_text(max_requests_, "request", "requests") +
             ")";
}

void SloWatch::miss(SimTime now) {
  ++missed_;
  if (limits_.min_attainment <= 0 || max_requests_ <= 0 || failed()) return;
  // met / decided <= 1 - missed / decided <= 1 - missed / max_requests; a margin covers the
  // rounding of the judged quotient.
  const double best =
      static_cast<double>(max_requests_ - missed_) / static_cast<double>(max_requests_);
  if (best < limits_.min_attainment - 1e-9) {
    failure_ = "attainment < " + number_text(limits_.min_attainment) + " (decided early at " +
               when_text(now) + ": " + count_text(missed_, "request", "requests") +
               " missed, of at most " + std::to_string(max_requests_) + ")";
  }
}

}  // namespace moesim::sim
