// Early verdicts: decides, while a run goes on, that its SLO verdict (a capacity search's probe,
// sim/study/search.h) fails whatever the rest of the run does, so that the probe may stop there.
// Samples are final when taken and a run takes at most max_requests of each, so a percentile is
// above its limit for good once enough samples are, and the attainment once enough requests are
// missed for good. Only limits whose final figure is computed exactly are watched (percentiles
// while max_requests fits the sketch's exact samples; never queueing). docs/sweeps.md ("Early
// verdicts") has the rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/run_metrics.h"

namespace moesim::sim {

struct SloWatchLimits {
  enum class Metric { kTtft, kTpot, kE2e, kQueueing };
  struct Percentile {
    std::string name;  // as the search names it, e.g. "ttft_p99_ms"
    Metric metric = Metric::kTtft;
    double quantile = 0.99;  // 0.5, 0.9 or 0.99: the summary's percentiles
    double limit_ms = 0;
  };
  std::vector<Percentile> percentiles;
  // The attainment's per-request limits (slo_status) and its minimum; min_attainment <= 0: not
  // watched.
  double ttft_ms = 0, tpot_ms = 0;
  double min_attainment = 0;
};

class SloWatch {
 public:
  // `max_requests`: an upper bound on the requests the run will have (every sample count and
  // the attainment's decided count are at most this). Only requests arriving at or after
  // `measured_from_ns` count: the latest a steady run's measured window can start (the warm-up
  // cut, steady_state.h), so what they miss is missed in the measured window whatever the cut.
  SloWatch(SloWatchLimits limits, int64_t max_requests, SimTime measured_from_ns = 0);

  // A request's first token (its TTFT sample).
  void on_first_token(const RequestRecord& r, SimTime now);
  // A request completed (its TPOT and end-to-end samples, its attainment).
  void on_complete(const RequestRecord& r, SimTime now);
  // A request rejected (missed for the attainment).
  void on_reject(const RequestRecord& r, SimTime now);

  // Empty while the verdict can still pass; else why it cannot, and when that became certain.
  const std::string& failure() const { return failure_; }
  bool failed() const { return !failure_.empty(); }

  // The fewest samples above a limit that put percentile q of any n <= max_samples samples above
  // it (n - floor(q (n - 1)) at n = max_samples, as percentiles() indexes).
  static int64_t samples_above_for_certain(double quantile, int64_t max_samples);

 private:
  struct Watched {
    SloWatchLimits::Percentile limit;
    int64_t needed = 0;  // samples above the limit that make it certain
    int64_t above = 0;
  };
  void sample(SloWatchLimits::Metric metric, double value_ms, SimTime now);
  void miss(SimTime now);

  SloWatchLimits limits_;
  int64_t max_requests_;
  SimTime measured_from_ns_;
  std::vector<Watched> watched_;
  int64_t missed_ = 0;
  std::string failure_;
};

}  // namespace moesim::sim
