// Capacity search: for each configuration of a grid, the highest request rate that still meets
// the SLOs, and the cheapest configuration (fewest GPUs) that sustains a target rate.
//
// The rate is scaled by a multiplier m on the scenario's own rate: for synthetic and agent
// workloads `workload.arrival.rate_per_s` (requests or sessions per second) becomes m times the
// configuration's value, for trace workloads `workload.rate_multiplier` becomes m times its
// value. Every probe runs with the same root seed, so a higher multiplier replays the same
// requests compressed in time (common random numbers).
//
// "Meets the SLOs" at a rate: every percentile limit holds (over the samples of the run summary)
// and the attainment, met / decided, is at least min_attainment. Attainment is the one of every
// command (slo_status, sim/metrics/run_metrics.h), with the per-request limits of the --slo
// option: met are the requests completed within the limits; decided are the met and those that
// missed (completed outside a limit, rejected, or in flight past the TTFT limit at the end).
// Requests still running within their limits are not counted.
//
// Search: probe m = 1, then double (or halve) until the verdict flips, at most max_doublings
// times; then bisect geometrically until hi / lo <= 1 + rel_tolerance. This assumes that meeting
// the SLOs is monotone in the rate (true of queueing systems on average; a noisy scenario can
// break it near the threshold, so give runs enough requests). The answer is the highest probed
// multiplier that met the SLOs; the lowest failing multiplier above it is reported alongside.
//
// Parallel probes: a search with spare threads runs the probes it may need next speculatively
// (search_max_multiplier's num_threads), then keeps only those the one-at-a-time search makes,
// so the result, its probes and their order are the same for every thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/serving/cluster.h"
#include "sim/study/infeasibility.h"
#include "sim/study/overrides.h"
#include "sim/study/planner.h"
#include "sim/study/slo_limits.h"

namespace moesim::sim::study {

// The verdict on one run. A limit over no data is not met: a percentile limit over no samples
// ("ttft_p99_ms n/a (no samples)") and, when min_attainment > 0, an attainment with no decided
// request.
struct SloVerdict {
  bool meets = false;
  int64_t num_met = 0, num_decided = 0;  // count_slo (sim/metrics/run_metrics.h)
  double attainment = 0;                 // num_met / num_decided; 0 (no data) when none decided
  std::string reason;  // the first limit broken, e.g. "ttft_p99_ms 2301 > 2000"; "" if met
};
// A run stopped by an early verdict (RunOutput::stopped_early) fails with that reason; a
// cancelled one (RunOutput::cancelled) fails with reason "cancelled".
SloVerdict judge_run(const RunOutput& out, const Scenario& scenario, const SearchSlo& slo);
// The limits a probe of `scenario` watches for an early verdict (RunOptions::
// stop_on_certain_failure): the percentile limits, the per-request limits and the attainment.
SloWatchLimits watch_limits(const Scenario& scenario, const SearchSlo& slo);

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

// The offered rate at multiplier 1, per second: arrival.rate_per_s of synthetic (requests) and
// agent (sessions) workloads, or a trace's mean arrival rate over its replay window times its
// rate_multiplier (0 for a window with fewer than two requests).
double base_rate_per_s(const Scenario& scenario);
// "req/s" or "sessions/s".
const char* rate_unit(const Scenario& scenario);
// The override that sets the scenario's rate to m times its own.
Override rate_override(const Scenario& scenario, double multiplier);

struct ConfigSearch;

struct SearchOptions {
  // Diagnose each configuration before probing it (infeasibility.h); one found infeasible at
  // any rate is not probed unless probe_infeasible.
  bool diagnose = true;
  bool probe_infeasible = false;
  // Run every probe to its end. By default a probe stops as soon as its verdict fails whatever
  // the rest of the run does (early verdicts, sim/metrics/slo_watch.h): the search decides
  // exactly as with full probes; a failing probe's figures are then those of the part it ran.
  bool full_probes = false;
  // The price of one GPU-hour for the planner's figures (absent: the topology's, planner.h).
  std::optional<double> gpu_price_per_hour;
  std::optional<uint64_t> seed;  // absent: each configuration's [run] seed
  double rel_tolerance = 0.02;   // > 0
  int32_t max_doublings = 10;    // >= 0
  // >= 1. Threads running simulations: the configurations to search (this shard's, not already
  // done) run in parallel on min(num_threads, their number) threads, and each configuration's
  // probes on max(1, num_threads / that) threads (ProbeParallelism), so a search of fewer
  // configurations than threads probes speculatively; never more than num_threads at once.
  int32_t num_threads = 1;
  std::optional<double> target_rate_per_s;  // for the cheapest configuration
  // Only the configurations with config_idx % shard_count == shard_index are searched (MPI
  // ranks); the others keep their config_idx and overrides, nothing else, and never count as
  // the cheapest.
  int32_t shard_index = 0;  // in [0, shard_count)
  int32_t shard_count = 1;  // >= 1
  // Configurations already searched (resumed from a journal): skipped like other shards' ones;
  // the caller fills them in. Indexed by config_idx; empty: none.
  std::vector<bool> already_done;
  // Called with every configuration this call searched, in config_idx order, as soon as it and
  // all before it are done (e.g. to journal it); under a lock, never concurrently.
  std::function<void(const ConfigSearch&)> on_searched;
};

struct RateProbe {
  double multiplier = 0;
  double rate_per_s = 0;
  SloVerdict verdict;
  // The run's throughput and latency, for the planner (absent where the run has no such data).
  std::optional<double> input_tokens_per_s, output_tokens_per_s, ttft_p99_ms, tpot_p99_ms;
};

struct ConfigSearch {
  int64_t config_idx = 0;
  std::vector<Override> overrides;
  std::string error;  // non-empty: the configuration does not parse or does not fit
  int64_t num_gpus = 0;
  std::string rate_unit;
  double base_rate_per_s = 0;
  // Trace workloads: the trace's own mean arrival rate over its replay window (requests/s) and
  // the configuration's workload.rate_multiplier, so multiplier m replays the trace at
  // m x trace_multiplier its real rate. 0 and 1 for synthetic and agent workloads.
  double trace_rate_per_s = 0;
  double trace_multiplier = 1;
  GpuPrice price;
  Diagnosis diagnosis;  // before the probes (SearchOptions::diagnose)
  // Diagnosed infeasible at any rate and therefore not probed.
  bool not_probed = false;
  MultiplierSearch search;
  double max_rate_per_s = 0;      // base_rate_per_s x search.max_ok
  double fail_rate_per_s = 0;     // base_rate_per_s x search.min_fail (0: none failed)
  std::vector<RateProbe> probes;  // in probe order
};

// The probe at the highest multiplier that met the SLOs (the one max_rate_per_s reports); null
// when none met.
const RateProbe* best_probe(const ConfigSearch& c);

struct SearchResult {
  std::vector<ConfigSearch> configs;  // grid order
  // Index into configs of the configuration with the fewest GPUs whose max rate is at least the
  // target (ties: the higher max rate, then grid order); absent without a target or when none.
  std::optional<size_t> cheapest;
};

// The index of the configuration with the fewest GPUs whose max rate is at least
// `target_rate_per_s` (ties: the higher max rate, then the lower index); configurations with an
// error or no rate meeting the SLOs are never chosen. Absent when none qualifies.
std::optional<size_t> cheapest_config(const std::vector<ConfigSearch>& configs,
                                      double target_rate_per_s);

// The planner's table of a search (planner.h): per configuration the figures of its best probe,
// feasible when it met the SLOs at some probed rate (and at least the target rate when given)
// and was not diagnosed infeasible; the cheapest feasible is `cheapest` with a target (the fewest
// GPUs sustaining it), else the lowest cost per million output tokens at the max rate.
Plan search_plan(const SearchResult& result, const std::vector<std::string>& parameter_keys,
                 const SearchSlo& slo, std::optional<double> target_rate_per_s);

// Searches every configuration (the template with each override set applied). Deterministic:
// the result does not depend on num_threads. progress(num_done, num_configs) after each.
SearchResult search_rates(const ScenarioTemplate& scenario,
                          const std::vector<std::vector<Override>>& configs, const SearchSlo& slo,
                          const SearchOptions& options,
                          const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace moesim::sim::study
