// The search on the rate multiplier (search.h): probe m = 1, then double (or halve) until the
// verdict flips, at most max_doublings times; then bisect geometrically until hi / lo <= 1 +
// rel_tolerance. This assumes that meeting the SLOs is monotone in the rate (true of queueing
// systems on average; a noisy scenario can break it near the threshold, so give runs enough
// requests). The answer is the highest probed multiplier that met the SLOs; the lowest failing
// multiplier above it is reported alongside.
//
// Parallel probes: a search with spare threads runs the probes it may need next speculatively
// (num_threads), then keeps only those the one-at-a-time search makes, so the result, its probes
// and their order are the same for every thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace moesim::sim::study {

// Highest multiplier for which meets(m) holds, by the bracketing and bisection above.
struct MultiplierSearch {
  bool found = false;   // some probed multiplier met
  double max_ok = 0;    // highest probed multiplier that met (0 when none)
  double min_fail = 0;  // lowest failing multiplier above max_ok; 0 when none failed
  int32_t num_probes = 0;
};

// How search_max_multiplier runs its probes.
struct ProbeParallelism {
  // Threads that call meets (>= 1; the calling thread is one of them). With 1, meets(m) is called
  // for exactly the multipliers of the search, in order. With more, meets must be safe to call
  // concurrently and must return the same verdict for a multiplier whatever else runs: while the
  // search waits for a verdict, the other threads probe the multipliers it may need next (the
  // most likely first, see search.cc), and the search then walks its one-at-a-time decisions
  // over the verdicts, asking for a multiplier only when its verdict is missing. Probes the walk
  // does not reach are discarded (work wasted for wall time); one still running when the search
  // can no longer need it (its multiplier is outside the bracket, or the search is done) is
  // told to stop (its `stop` flag, see ProbeFunction).
  int32_t num_threads = 1;
  // Called with each multiplier the one-at-a-time search probes, in its order, once its verdict
  // is in (before the next one's); never concurrently. An exception thrown by meets for such a
  // multiplier ends the search there and is rethrown; one thrown for a discarded probe is not.
  std::function<void(double)> kept;
  // Out (optional): how many times meets was called, discarded probes included.
  int32_t* num_evaluated = nullptr;
  // Out (optional): how many running probes were told to stop.
  int32_t* num_stopped = nullptr;
};

// A probe: whether the SLOs are met at multiplier m. `stop` turns true (from another thread)
// when the search no longer needs the verdict; the probe may then return at once, with any
// verdict (it is discarded).
using ProbeFunction = std::function<bool(double m, const std::atomic<bool>& stop)>;

// The result, num_probes and the multipliers passed to `kept` do not depend on num_threads.
MultiplierSearch search_max_multiplier(const ProbeFunction& meets, double rel_tolerance,
                                       int32_t max_doublings,
                                       const ProbeParallelism& parallel = {});
// The same with a probe that cannot stop early.
MultiplierSearch search_max_multiplier(const std::function<bool(double)>& meets,
                                       double rel_tolerance, int32_t max_doublings,
                                       const ProbeParallelism& parallel = {});

}  // namespace moesim::sim::study
