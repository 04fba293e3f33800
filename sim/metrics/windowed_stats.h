// Request statistics kept by arrival segment (SystemSeries::segment_ns wide), so that a run's
// warm-up, known only at its end (steady_state.h), can be cut from the figures after the fact:
// the summary merges the segments from the warm-up's end on. Each segment's percentile sketches
// stay exact up to PercentileSketch::kExactSamples values, and the merge is exact while the
// measured requests fit that too, so the figures are those of one sketch over the measured
// requests (memory: docs/outputs.md, "Memory").
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/request_stats.h"

namespace moesim::sim {

class WindowedRequestStats {
 public:
  // `segment_ns` > 0.
  WindowedRequestStats(double slo_ttft_ms, double slo_tpot_ms, SimTime segment_ns);

  // A record as RequestStats::add takes it, filed under its arrival's segment.
  void add(const RequestRecord& r, SimTime end_ns);
  // The requests arriving at or after `from_ns` (rounded down to a segment boundary).
  RequestStats from(SimTime from_ns) const;

  // Totals over every segment (conservation checks).
  int64_t num_arrived() const { return num_arrived_; }
  int64_t num_completed() const { return num_completed_; }
  int64_t num_rejected() const { return num_rejected_; }
  int64_t num_in_flight() const { return num_in_flight_; }

 private:
  double slo_ttft_ms_, slo_tpot_ms_;
  SimTime segment_ns_;
  std::vector<RequestStats> segments_;
  int64_t num_arrived_ = 0, num_completed_ = 0, num_rejected_ = 0, num_in_flight_ = 0;
};

}  // namespace moesim::sim
