#include "sim/metrics/windowed_stats.h"

#include <algorithm>

#include "base/check.h"

namespace moesim::sim {

WindowedRequestStats::WindowedRequestStats(double slo_ttft_ms, double slo_tpot_ms,
                                           SimTime segment_ns)
    : slo_ttft_ms_(slo_ttft_ms), slo_tpot_ms_(slo_tpot_ms), segment_ns_(segment_ns) {
  MOESIM_CHECK(segment_ns_ > 0, "windowed request stats: an empty segment");
}

void WindowedRequestStats::add(const RequestRecord& r, SimTime end_ns) {
  const auto seg = static_cast<size_t>(std::max<SimTime>(0, r.arrival_ns) / segment_ns_);
  while (segments_.size() <= seg) segments_.emplace_back(slo_ttft_ms_, slo_tpot_ms_);
  segments_[seg].add(r, end_ns);
  ++num_arrived_;
  num_completed_ += r.outcome == RequestOutcome::kCompleted;
  num_rejected_ += r.outcome == RequestOutcome::kRejected;
  num_in_flight_ += r.outcome == RequestOutcome::kInFlight;
}

RequestStats WindowedRequestStats::from(SimTime from_ns) const {
  RequestStats out(slo_ttft_ms_, slo_tpot_ms_);
  for (size_t i = static_cast<size_t>(std::max<SimTime>(0, from_ns) / segment_ns_);
       i < segments_.size(); ++i) {
    out.merge(segments_[i]);
  }
  return out;
}

}  // namespace moesim::sim
