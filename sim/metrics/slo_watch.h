// Early verdicts: decides, while a run goes on, that its SLO verdict (a capacity search's probe,
// sim/study/search.h) fails whatever the rest of the run does, so that the probe may stop there.
// Samples are final when taken and a run takes at most max_requests of each, so a percentile is
// above its limit for good once enough samples are, and the attainment once enough requests are
// missed for good. Only limits whose final figure is computed exactly are watched (percentiles
// while max_requests fits the sketch's exact samples; never queueing). docs/sweeps.md ("Early
// verdicts") has the rules.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
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

  // A request routed to a replica, waiting for its first token; `key` names it in
  // on_first_token (unique per request of the run). From its arrival plus a TTFT limit on it is
  // above that limit whatever follows: its first token comes later, or it is in flight at the
  // end having waited longer (a censored value above the limit, a miss for the attainment). Only
  // requests that can no longer be rejected are queued (a rejected one has no TTFT).
  void on_queued(int64_t key, SimTime arrival_ns);
  // Counts the queued requests whose wait has passed a TTFT limit by `now` (call as time moves:
  // at each step's end and arrival).
  void on_time(SimTime now);

  // A request's first token (its TTFT sample). `key`: as queued, or -1 for one never queued (a
  // first token of a request on_time has already counted is not counted again).
  void on_first_token(const RequestRecord& r, SimTime now, int64_t key = -1);
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
  // A TTFT limit watched through waits: a percentile's (watched index) or the attainment's (-1).
  struct Deadline {
    int watched = -1;
    double limit_ms = 0;
    std::set<std::pair<SimTime, int64_t>> waiting;  // (arrival, key), not yet past the limit
    std::unordered_set<int64_t> counted;            // past it, counted, no first token yet
  };
  void sample(SloWatchLimits::Metric metric, double value_ms, SimTime now);
  void above(Watched& w, SimTime now);
  void miss(SimTime now);

  SloWatchLimits limits_;
  int64_t max_requests_;
  SimTime measured_from_ns_;
  std::vector<Watched> watched_;
  std::vector<Deadline> deadlines_;
  int64_t missed_ = 0;
  std::string failure_;
};

}  // namespace moesim::sim
