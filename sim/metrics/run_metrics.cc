#include "sim/metrics/run_metrics.h"

#include <algorithm>
#include <boost/sort/spreadsort/spreadsort.hpp>
#include <cmath>

#include "sim/metrics/request_stats.h"

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
  // Boost's radix-based float sort: the same ascending order as std::sort (equal values are
  // indistinguishable), so the same percentiles and the same sum below; faster on the tens of
  // thousands of latencies a fleet run ends with.
  boost::sort::spreadsort::spreadsort(v.begin(), v.end());
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

SloStatus slo_status(const RequestRecord& r, SimTime end_ns, double ttft_limit_ms,
                     double tpot_limit_ms) {
  switch (r.outcome) {
    case RequestOutcome::kCompleted: {
      double tpot_ns = r.tpot_ns();
      bool ok =
          to_ms(r.ttft_ns()) <= ttft_limit_ms && (tpot_ns < 0 || tpot_ns / 1e6 <= tpot_limit_ms);
      return ok ? SloStatus::kMet : SloStatus::kMissed;
    }
    case RequestOutcome::kRejected:
      return SloStatus::kMissed;
    case RequestOutcome::kInFlight:
      break;
  }
  SimTime waited_ns = r.first_token_ns >= 0 ? r.ttft_ns() : end_ns - r.arrival_ns;
  if (to_ms(waited_ns) > ttft_limit_ms) return SloStatus::kMissed;
  // Decoding: its TPOT is at least the time since its first token over its requested tokens
  // after the first, already above the limit when that is.
  if (r.first_token_ns >= 0 && r.output_tokens >= 2 &&
      to_ms(end_ns - r.first_token_ns) / static_cast<double>(r.output_tokens - 1) > tpot_limit_ms) {
    return SloStatus::kMissed;
  }
  return SloStatus::kUndecided;
}

SloCounts count_slo(const std::vector<RequestRecord>& requests, SimTime end_ns,
                    double ttft_limit_ms, double tpot_limit_ms) {
  SloCounts c;
  for (const RequestRecord& r : requests) {
    SloStatus st = slo_status(r, end_ns, ttft_limit_ms, tpot_limit_ms);
    c.num_met += st == SloStatus::kMet;
    c.num_decided += st != SloStatus::kUndecided;
  }
  return c;
}

RunSummary summarize(const std::vector<RequestRecord>& requests, const std::vector<GpuRecord>& gpus,
                     const RunCounters& counters, SimTime duration_ns, double slo_ttft_ms,
                     double slo_tpot_ms) {
  RequestStats stats(slo_ttft_ms, slo_tpot_ms);
  for (const RequestRecord& r : requests) stats.add(r, duration_ns);
  return summarize(stats, gpus, counters, duration_ns);
}

RunSummary summarize(const RequestStats& requests, const std::vector<GpuRecord>& gpus,
                     const RunCounters& counters, SimTime duration_ns, SimTime gpu_span_ns) {
  if (gpu_span_ns < 0) gpu_span_ns = duration_ns;
  RunSummary s;
  s.duration_s = to_seconds(duration_ns);
  s.counters = counters;
  s.slo.ttft_ms = requests.slo_ttft_ms();
  s.slo.tpot_ms = requests.slo_tpot_ms();
  s.num_arrived = requests.num_arrived();
  s.num_completed = requests.num_completed();
  s.num_rejected = requests.num_rejected();
  s.num_in_flight = requests.num_in_flight();
  s.num_waiting_first_token = requests.num_waiting_first_token();
  s.max_wait_first_token_ms = requests.max_wait_first_token_ms();
  const int64_t in_tokens = requests.input_tokens(), out_tokens = requests.output_tokens();
  s.slo.num_met = requests.slo().num_met;
  s.slo.num_decided = requests.slo().num_decided;
  s.queueing_ms = requests.queueing_ms().summary_with_censored(requests.censored_queueing_ms());
  s.kv_load_ms = requests.kv_load_ms().summary();
  s.prefill_ms = requests.prefill_ms().summary();
  s.ttft_ms = requests.ttft_ms().summary_with_censored(requests.censored_ttft_ms());
  s.tpot_ms = requests.tpot_ms().summary_with_censored(requests.censored_tpot_ms());
  s.e2e_ms = requests.e2e_ms().summary_with_censored(requests.censored_e2e_ms());
  s.has.rates = s.duration_s > 0;
  if (s.has.rates) {
    s.input_tokens_per_s = static_cast<double>(in_tokens) / s.duration_s;
    s.output_tokens_per_s = static_cast<double>(out_tokens) / s.duration_s;
    s.requests_per_s = static_cast<double>(s.num_completed) / s.duration_s;
    s.slo.goodput_req_per_s = static_cast<double>(s.slo.num_met) / s.duration_s;
  }
  s.has.attainment = s.slo.num_decided > 0;
  if (s.has.attainment) {
    s.slo.attainment = static_cast<double>(s.slo.num_met) / static_cast<double>(s.slo.num_decided);
  }
  s.has.max_wait_first_token = s.num_waiting_first_token > 0;
  s.has.prefix_cache = counters.prompt_tokens_total > 0;
  if (s.has.prefix_cache) {
    s.prefix_cache_hit_rate = static_cast<double>(counters.prompt_tokens_cached) /
                              static_cast<double>(counters.prompt_tokens_total);
  }
  for (const GpuRecord& g : gpus) {
    if (g.num_kv_blocks <= 0) continue;
    s.has.kv_pool = true;
    s.kv_high_water_fraction =
        std::max(s.kv_high_water_fraction, static_cast<double>(g.kv_high_water_blocks) /
                                               static_cast<double>(g.num_kv_blocks));
  }
  s.has.gpu_time = !gpus.empty() && gpu_span_ns > 0;
  if (s.has.gpu_time) {
    double c = 0, m = 0, w = 0;
    for (const GpuRecord& g : gpus) {
      c += static_cast<double>(g.compute_ns);
      m += static_cast<double>(g.comm_ns);
      w += static_cast<double>(g.wait_ns);
    }
    double denom = static_cast<double>(gpu_span_ns) * static_cast<double>(gpus.size());
    s.compute_fraction = c / denom;
    s.comm_fraction = m / denom;
    s.wait_fraction = w / denom;
  }
  s.has.expert_load = counters.mean_gpu_selections_sum > 0;
  if (s.has.expert_load) {
    s.expert_imbalance = (counters.max_gpu_selections_sum - counters.mean_gpu_selections_sum) /
                         counters.mean_gpu_selections_sum;
  }
  s.has.gpu_balance = counters.num_gpu_balance_samples > 0;
  if (s.has.gpu_balance) {
    const auto n = static_cast<double>(counters.num_gpu_balance_samples);
    s.expert_gpu_imbalance_mean = counters.gpu_imbalance_sum / n;
    s.expert_gpu_balancedness = counters.gpu_balancedness_sum / n;
  }
  s.has.slot_balance = counters.num_slot_balance_samples > 0;
  if (s.has.slot_balance) {
    const auto n = static_cast<double>(counters.num_slot_balance_samples);
    s.expert_slot_imbalance_mean = counters.slot_imbalance_sum / n;
    s.expert_slot_balancedness = counters.slot_balancedness_sum / n;
  }
  return s;
}

}  // namespace moesim::sim
