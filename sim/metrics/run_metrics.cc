#include "sim/metrics/run_metrics.h"

#include <algorithm>
#include <cmath>

namespace moesim::sim {

const char* request_outcome_name(RequestOutcome o) {
  switch (o) {
    case RequestOutcome::kCompleted:
      return "completed";
    case RequestOutcome::kRejected:
      return "rejected";
    case RequestOutcome::kInFlight:
      return "in_flight";
  }
  return "?";
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.count = static_cast<int64_t>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    double pos = q * static_cast<double>(v.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = std::min(lo + 1, v.size() - 1);
    double frac = pos - static_cast<double>(lo);
    return v[lo] + (v[hi] - v[lo]) * frac;
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  p.max = v.back();
  return p;
}

RunSummary summarize(const std::vector<RequestRecord>& requests, const std::vector<GpuRecord>& gpus,
                     const RunCounters& counters, SimTime duration_ns, double slo_ttft_ms,
                     double slo_tpot_ms) {
  RunSummary s;
  s.duration_s = to_seconds(duration_ns);
  s.counters = counters;
  std::vector<double> q, ttft, tpot, e2e;
  int64_t in_tokens = 0, out_tokens = 0;
  s.slo.ttft_ms = slo_ttft_ms;
  s.slo.tpot_ms = slo_tpot_ms;
  for (const RequestRecord& r : requests) {
    ++s.num_arrived;
    switch (r.outcome) {
      case RequestOutcome::kCompleted:
        ++s.num_completed;
        break;
      case RequestOutcome::kRejected:
        ++s.num_rejected;
        break;
      case RequestOutcome::kInFlight:
        ++s.num_in_flight;
        if (r.first_token_ns < 0) {
          ++s.num_waiting_first_token;
          s.max_wait_first_token_ms =
              std::max(s.max_wait_first_token_ms, to_ms(duration_ns - r.arrival_ns));
        }
        break;
    }
    if (r.queueing_ns() >= 0) q.push_back(to_ms(r.queueing_ns()));
    if (r.ttft_ns() >= 0) {
      ttft.push_back(to_ms(r.ttft_ns()));
      in_tokens += r.prompt_tokens;
    }
    out_tokens += r.generated_tokens;
    if (r.outcome != RequestOutcome::kCompleted) continue;
    e2e.push_back(to_ms(r.e2e_ns()));
    double tp = r.tpot_ns();
    if (tp >= 0) tpot.push_back(tp / 1e6);
    bool ok_ttft = to_ms(r.ttft_ns()) <= slo_ttft_ms;
    bool ok_tpot = tp < 0 || tp / 1e6 <= slo_tpot_ms;
    if (ok_ttft && ok_tpot) ++s.slo.num_met;
  }
  s.queueing_ms = percentiles(std::move(q));
  s.ttft_ms = percentiles(std::move(ttft));
  s.tpot_ms = percentiles(std::move(tpot));
  s.e2e_ms = percentiles(std::move(e2e));
  if (s.duration_s > 0) {
    s.input_tokens_per_s = static_cast<double>(in_tokens) / s.duration_s;
    s.output_tokens_per_s = static_cast<double>(out_tokens) / s.duration_s;
    s.requests_per_s = static_cast<double>(s.num_completed) / s.duration_s;
    s.slo.goodput_req_per_s = static_cast<double>(s.slo.num_met) / s.duration_s;
  }
  s.slo.attainment = s.num_completed > 0
                         ? static_cast<double>(s.slo.num_met) / static_cast<double>(s.num_completed)
                         : 0.0;
  s.prefix_cache_hit_rate = counters.prompt_tokens_total > 0
                                ? static_cast<double>(counters.prompt_tokens_cached) /
                                      static_cast<double>(counters.prompt_tokens_total)
                                : 0.0;
  if (!gpus.empty() && duration_ns > 0) {
    double c = 0, m = 0, w = 0;
    for (const GpuRecord& g : gpus) {
      c += static_cast<double>(g.compute_ns);
      m += static_cast<double>(g.comm_ns);
      w += static_cast<double>(g.wait_ns);
      if (g.num_kv_blocks > 0) {
        s.kv_high_water_fraction =
            std::max(s.kv_high_water_fraction, static_cast<double>(g.kv_high_water_blocks) /
                                                   static_cast<double>(g.num_kv_blocks));
      }
    }
    double denom = static_cast<double>(duration_ns) * static_cast<double>(gpus.size());
    s.compute_fraction = c / denom;
    s.comm_fraction = m / denom;
    s.wait_fraction = w / denom;
  }
  if (counters.mean_gpu_selections_sum > 0) {
    s.expert_imbalance = (counters.max_gpu_selections_sum - counters.mean_gpu_selections_sum) /
                         counters.mean_gpu_selections_sum;
  }
  return s;
}

}  // namespace moesim::sim
