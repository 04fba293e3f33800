#include "sim/serving/step_state.h"

#include <algorithm>

#include "sim/core/horizon.h"

namespace moesim::sim {

void trace_span(StepObserver* observer, int32_t g, const char* name, int32_t layer_idx,
                double start_s, double dur_s) {
  if (!observer || !(start_s + dur_s <= kHorizonS)) return;
  // Both ends rounded, so that a span ending where the next one starts (the same clock value)
  // never overlaps it by a rounding nanosecond.
  const SimTime start_ns = from_seconds(start_s);
  const SimTime dur_ns = from_seconds(start_s + dur_s) - start_ns;
  if (dur_ns > 0) observer->on_slice(g, name, layer_idx, start_ns, dur_ns);
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

}  // namespace moesim::sim
