#include "sim/serving/step_state.h"

#include <algorithm>

#include "sim/core/horizon.h"

namespace moesim::sim {

bool trace_span(StepObserver* observer, int32_t g, const char* name, int32_t layer_idx,
                double start_s, double dur_s, double sm_lost_s) {
  if (!observer || !(start_s + dur_s <= kHorizonS)) return false;
  // Both ends rounded, so that a span ending where the next one starts (the same clock value)
  // never overlaps it by a rounding nanosecond.
  const SimTime start_ns = from_seconds(start_s);
  const SimTime dur_ns = from_seconds(start_s + dur_s) - start_ns;
  if (dur_ns <= 0) return false;
  observer->on_slice(g, name, layer_idx, start_ns, dur_ns);
  if (sm_lost_s > 0) {
    observer->on_sm_sharing(g, layer_idx, from_seconds(sm_lost_s), (dur_s - sm_lost_s) / dur_s);
  }
  return true;
}

void StepState::resize(int32_t gpus, int32_t gpus_per_rank) {
  num_gpus = gpus;
  tp = gpus_per_rank;
  const auto n = static_cast<size_t>(gpus);
  result.compute_ns.assign(n, 0);
  result.comm_ns.assign(n, 0);
  result.wait_ns.assign(n, 0);
  clock_s.assign(n, 0);
  compute_s.assign(n, 0);
  comm_s.assign(n, 0);
  wait_s.assign(n, 0);
  gpu_tokens.assign(n, 0);
  rank_tokens.assign(n, 0);
  src_tokens.assign(n, 0);
}

void StepState::begin(bool track_nic_bytes) {
  std::fill(result.compute_ns.begin(), result.compute_ns.end(), 0);
  std::fill(result.comm_ns.begin(), result.comm_ns.end(), 0);
  std::fill(result.wait_ns.begin(), result.wait_ns.end(), 0);
  result.duration_ns = 0;
  result.draft_ns = 0;
  std::fill(result.draft_gpu_busy_ns.begin(), result.draft_gpu_busy_ns.end(), 0);
  if (track_nic_bytes) {
    result.nic_in_bytes.assign(static_cast<size_t>(num_gpus), 0.0);
    result.nic_out_bytes.assign(static_cast<size_t>(num_gpus), 0.0);
  }
  static_cast<StepTotals&>(result) = StepTotals{};
  std::fill(clock_s.begin(), clock_s.end(), 0.0);
  std::fill(compute_s.begin(), compute_s.end(), 0.0);
  std::fill(comm_s.begin(), comm_s.end(), 0.0);
  std::fill(wait_s.begin(), wait_s.end(), 0.0);
}

double StepState::latest_clock_s() const {
  return *std::max_element(clock_s.begin(), clock_s.end());
}

void StepState::advance_with_barriers(int32_t layer_idx, std::span<const double> ffn_s,
                                      double max_ffn_s, double dispatch_s, double combine_s,
                                      double ready, StepObserver* observer) {
  if (!observer) {
    // The loops below in one pass: every GPU leaves the dispatch at `start`, and the latest one
    // to finish its experts is the one with the most expert seconds (rounding is monotone, so
    // max(start + f) = start + max(f) exactly). The same sums in the same order per GPU.
    const double start = ready + dispatch_s;
    const double ready2 = start + max_ffn_s;
    const double end = ready2 + combine_s;
    for (int32_t g = 0; g < num_gpus; ++g) {
      wait_s[g] += ready - clock_s[g];
      comm_s[g] += dispatch_s;
      compute_s[g] += ffn_s[g];
      wait_s[g] += ready2 - (start + ffn_s[g]);
      comm_s[g] += combine_s;
      clock_s[g] = end;
    }
    return;
  }
  for (int32_t g = 0; g < num_gpus; ++g) {
    const double w = ready - clock_s[g];
    trace_span(observer, g, "wait", layer_idx, clock_s[g], w);
    trace_span(observer, g, "dispatch", layer_idx, ready, dispatch_s);
    wait_s[g] += w;
    comm_s[g] += dispatch_s;
    clock_s[g] = ready + dispatch_s;
    advance_compute(g, "experts", layer_idx, ffn_s[g], observer);
  }
  const double ready2 = latest_clock_s();
  for (int32_t g = 0; g < num_gpus; ++g) {
    const double w = ready2 - clock_s[g];
    trace_span(observer, g, "wait", layer_idx, clock_s[g], w);
    trace_span(observer, g, "combine", layer_idx, ready2, combine_s);
    wait_s[g] += w;
    comm_s[g] += combine_s;
    clock_s[g] = ready2 + combine_s;
  }
}

void StepState::advance_overlapped(int32_t layer_idx, std::span<const double> ffn_s,
                                   double dispatch_s, double combine_s, StepObserver* observer) {
  const double start = *std::min_element(clock_s.begin(), clock_s.end());
  double c = 0;
  for (int32_t g = 0; g < num_gpus; ++g) c = std::max(c, clock_s[g] - start + ffn_s[g]);
  const double d = dispatch_s + combine_s;
  const double end = start + std::max(c, d) + std::min(c, d) / 2.0;
  for (int32_t g = 0; g < num_gpus; ++g) {
    const double busy = ffn_s[g];
    trace_span(observer, g, "experts", layer_idx, clock_s[g], busy);
    trace_span(observer, g, "dispatch+combine (overlapped)", layer_idx, start, d);
    compute_s[g] += busy;
    comm_s[g] += d;
    wait_s[g] += std::max(0.0, end - clock_s[g] - busy - d);
    clock_s[g] = end;
  }
}

bool StepState::finish() {
  const double end = latest_clock_s();
  // Every op and collective was checked on its own; their sums are checked here. Each GPU's
  // compute, communication and wait sums are at most its clock, so `end` bounds them all.
  if (!within_horizon_s(end)) [[unlikely]] {
    return false;
  }
  result.duration_ns = std::max<SimTime>(1, from_seconds(end));
  for (int32_t g = 0; g < num_gpus; ++g) {
    wait_s[g] += end - clock_s[g];
    result.compute_ns[g] = from_seconds(compute_s[g]);
    result.comm_ns[g] = from_seconds(comm_s[g]);
    result.wait_ns[g] = from_seconds(wait_s[g]);
  }
  return true;
}

void StepState::throw_beyond_horizon(const std::string& what,
                                     const std::string& cost_inputs) const {
  const auto slowest =
      static_cast<size_t>(std::max_element(clock_s.begin(), clock_s.end()) - clock_s.begin());
  throw_bad_duration(what, latest_clock_s(),
                     "its slowest GPU computes for " + format_number(compute_s[slowest]) +
                         " s and spends " + format_number(comm_s[slowest]) +
                         " s in all-to-alls; check the topology's bandwidths and " + cost_inputs);
}

}  // namespace moesim::sim
