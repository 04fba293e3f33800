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

namespace moesim::sim::study {

struct SweepParameter {
  std::string key_path;               // dotted key path into the scenario
  std::vector<OverrideValue> values;  // non-empty, one TOML type (integers and floats: floats)
  int32_t line = 0;                   // line of `key` in the sweep file
  std::vector<int32_t> value_lines;   // line of each value
};

struct SweepSpec {
  std::string file;                        // the sweep file, for messages
  std::string scenario_path;               // resolved against the sweep file's directory
  std::vector<SweepParameter> parameters;  // in file order
  // Seeds of every configuration; empty: the configuration's [run] seed plus 0 .. N-1 for
  // num_replications = N.
  std::vector<uint64_t> seeds;
  int32_t num_replications = 1;  // >= 1; used when `seeds` is empty
};

// Reads and checks a sweep file: keys `scenario` (string; optional when `scenario_path` is given,
// which then replaces it), `seeds` (non-empty array of distinct integers >= 0) or `replications`
// (integer >= 1), and [[parameters]] tables with `key` (string) and `values` (non-empty array of
// scalars). Errors are ConfigErrors naming the sweep file, line and key.
SweepSpec load_sweep(const std::string& path,
                     const std::optional<std::string>& scenario_path = std::nullopt);

// Checks the parameters against the scenario: the base scenario must load, and each value,
// applied alone, must name a key the scenario (or its policy's table) knows, with a value of the
// right type. Errors are ConfigErrors at the value's line in the sweep file, carrying the
// scenario parser's reason. Range and feasibility errors, which may depend on the other values of
// a configuration, are left to the runs (their rows get status "error").
void check_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario);

// The grid's configurations in grid order: one override per parameter, in parameter order.
std::vector<std::vector<Override>> grid_configs(const SweepSpec& spec);
// Runs per configuration: seeds.size(), or num_replications.
int64_t runs_per_config(const SweepSpec& spec);
// Runs of the whole sweep: configurations x runs per configuration.
int64_t num_sweep_runs(const SweepSpec& spec);

// A shard of a sweep: the K-th of N (1 <= K <= N).
struct Shard {
  int32_t index = 1;
  int32_t count = 1;
  bool contains(int64_t run_idx) const { return run_idx % count == index - 1; }
};
// Parses "K/N"; throws ConfigError (file "--shard") when malformed or out of range.
Shard parse_shard(const std::string& text);

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
// flag where `planner` has none or another one, or the reverse).
ResumePoint find_resume_point(const std::string& path, const SweepSpec& spec, const Shard& shard,
                              const SweepPlanner& planner = {});

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
