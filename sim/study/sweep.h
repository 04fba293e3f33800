// Parameter sweeps: a scenario, a grid of overrides (the cartesian product of each parameter's
// values) and seeds; every (configuration, seed) is one run and one CSV row. File format and CSV
// columns: docs/sweeps.md.
//
// Order is fixed by the file: the first [[parameters]] table varies slowest, seeds fastest, and
// run_idx counts runs in that order from 0. Runs go to a thread pool, but rows are written in
// run_idx order, so the CSV bytes are the same for any thread count. A shard K/N runs the runs
// with run_idx % N == K - 1; merge_sweep_csvs (sweep_merge.h) joins the shards' CSVs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/study/overrides.h"
#include "sim/study/search.h"
#include "sim/study/sweep_file.h"

namespace moesim::sim::study {

// What the planner columns of a sweep's rows use (docs/sweeps.md, "Planner outputs").
struct SweepPlanner {
  // The price of one GPU-hour (--gpu-price-per-hour); absent: each configuration's topology's
  // [gpu] price_usd_per_hour, or none (planner.h).
  std::optional<double> gpu_price_per_hour;
  // Percentile limits and the minimum attainment of `feasible`; per-request limits are each
  // configuration's [slo] (request_ttft_ms / request_tpot_ms must be absent).
  SearchSlo limits;
};

struct SweepOptions {
  int32_t num_threads = 1;  // >= 1
  Shard shard;
  SweepPlanner planner;
  // Resuming (ResumePoint): the shard's first num_done runs are already written, header
  // included; run_sweep writes neither.
  int64_t num_done = 0;
  // A run not converged at its [run] duration_s runs on up to this many times it (its
  // run.max_duration_s; a scenario's own max_duration_s wins). 1: never extended.
  double max_duration_factor = 1;
};

// Where a sweep's CSV written so far (a journal a kill interrupted) lets it resume: the header
// must be this sweep's, then the complete rows (ending in a newline) of the shard's runs in
// order; a row cut short by the kill, and anything after it, is dropped.
struct ResumePoint {
  int64_t num_done = 0;    // complete rows of the shard's first runs
  int64_t keep_bytes = 0;  // bytes of the header and those rows (0: start afresh)
};
// Reads `path` (absent: start afresh). A header that is not this sweep's, or rows of other runs,
// are a ConfigError naming the file and line (the file belongs to another sweep); so are rows
// whose planner columns were written with other settings (feasible_limits, or a price from the
// flag where `planner` has none or another one, or the reverse) or with another
// max_duration_factor.
ResumePoint find_resume_point(const std::string& path, const SweepSpec& spec, const Shard& shard,
                              const SweepPlanner& planner = {}, double max_duration_factor = 1);

struct SweepStats {
  int64_t num_runs = 0;    // rows written
  int64_t num_errors = 0;  // rows with status "error"
  int64_t num_broken = 0;  // rows with status "conservation_broken"
};

// The CSV header line (without newline) of a sweep.
std::string sweep_csv_header(const SweepSpec& spec);

// Runs the shard's runs of the sweep on options.num_threads threads and writes the header and
// one row per run, in run_idx order, to `csv`. `progress(num_done, num_total)` is called after
// each run (under a lock; never concurrently). A run whose scenario does not parse or does not
// fit in memory gives a row with status "error" and its message; other exceptions propagate.
SweepStats run_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario,
                     const SweepOptions& options, std::ostream& csv,
                     const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace moesim::sim::study
