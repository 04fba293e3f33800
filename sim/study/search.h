// Capacity search: for each configuration of a grid, the highest request rate that still meets
// the SLOs, and the cheapest configuration (fewest GPUs) that sustains a target rate. The rate is
// a multiplier on the scenario's own rate (arrival rate, or a trace's rate_multiplier), every
// probe on the same root seed, so a higher multiplier replays the same requests compressed in
// time. "Meets the SLOs": slo_verdict.h; the bracketing and bisection on the multiplier, serial
// or speculative on spare threads with the same result: multiplier_search.h. The whole search:
// docs/sweeps.md, "moesim search".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/serving/cluster.h"
#include "sim/study/infeasibility.h"
#include "sim/study/multiplier_search.h"
#include "sim/study/overrides.h"
#include "sim/study/planner.h"
#include "sim/study/slo_limits.h"
#include "sim/study/slo_verdict.h"

namespace moesim::sim::study {

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
  // >= 1. Each configuration is searched once per seed (seed, seed + 1, ...): the first search's
  // probes give the figures, all of them the interval on the max rate (rate_interval).
  int32_t replications = 1;
  // >= 1. A probe whose window has not converged by its run.duration_s runs on up to this many
  // times it (run.max_duration_s; a scenario's own max_duration_s wins). 1: never extended.
  double max_duration_factor = 1;
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
  std::optional<double> tpot_p50_ms;  // the planner's tokens/s per user
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
  // SearchOptions::replications > 1: the searches with the further seeds (seed + 1, ...).
  std::vector<MultiplierSearch> replicates;
};

// The interval on a configuration's max rate over its replications (the first search and
// ConfigSearch::replicates): the Student-t 95% interval of the mean of the seeds' max rates,
// widened to hold every seed's bracket [max rate, first failing rate]. Absent with one
// replication, or when some seed met the SLOs at no probed rate or at every one (no bracket).
struct RateInterval {
  double mean = 0, lo = 0, hi = 0;
  int32_t num_seeds = 0;
};
std::optional<RateInterval> rate_interval(const ConfigSearch& c);
// "3.21 [3.06, 3.36]": the mean and its interval with the decimals the interval supports (two
// significant digits of its half-width).
std::string interval_text(double mean, double lo, double hi);

// Why a configuration met the SLOs at no probed rate: "meets the SLOs at no probed rate (at x
// base 1: REASON; lowest probed: REASON)", the first probe's reason when it differs from the
// lowest's (an unknown window at the lowest rates hides what failed at the rate asked for).
std::string no_rate_reason(const ConfigSearch& c);

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
