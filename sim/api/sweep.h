// `moesim sweep`: a parameter grid (docs/sweeps.md) run on a pool of threads, one CSV row per run
// in grid order, with the planner's table of the whole sweep; `sweep merge` joins the CSVs of a
// sharded sweep; `sweep plan` reads a finished sweep's CSV back into the planner's table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/study/planner.h"
#include "sim/study/rank_group.h"
#include "sim/study/sweep.h"

namespace moesim::sim::api {

struct SweepRequest {
  std::string sweep_path;                    // SWEEP.toml
  std::optional<std::string> out_path;       // FILE.csv (default: `csv`)
  bool resume = false;                       // go on from FILE.csv.partial (needs out_path)
  std::ostream* csv = nullptr;               // the CSV without out_path; required then
  std::optional<int64_t> threads;            // 1..4096 (default: hardware threads)
  std::optional<std::string> shard;          // "K/N": the runs with run_idx % N == K - 1
  std::optional<std::string> slo;            // the feasible column's limits (percentile limits)
  std::optional<double> min_attainment;      // in [0, 1] (default 0.99)
  std::optional<double> gpu_price_per_hour;  // > 0 (default: the topology's [gpu] price)
  std::optional<std::string> plan_path;      // the planner's table, .csv or .json
  // A cell not converged by its run.duration_s runs on up to this many times it: [1, 100]
  // (default 5; 1: never; a scenario's own run.max_duration_s wins).
  std::optional<double> max_duration_factor;
  // (runs done, runs in all, runs resumed from the journal, counted in both), after each run.
  std::function<void(int64_t, int64_t, int64_t)> progress;
  // The MPI job the sweep is split over (rank r runs shard r + 1 of N, rank 0 writes the whole
  // CSV); null: this process alone.
  const study::RankGroup* ranks = nullptr;
};

struct SweepReport {
  study::SweepStats stats;          // over the job
  int64_t num_resumed = 0;          // runs kept from FILE.csv.partial
  int64_t num_sweep_runs = 0;       // of the whole grid
  study::Shard shard;               // this process's (1/1 without --shard)
  int32_t num_ranks = 1;            // MPI ranks (1: one process)
  bool is_root = true;              // false on MPI ranks other than 0: nothing else is filled
  std::optional<study::Plan> plan;  // the planner's table of a whole sweep (not of a shard)
  std::optional<std::string> out_path, plan_path;

  // 0, or 1 when a run broke conservation (the command line's exit code).
  int exit_code() const { return stats.num_broken > 0 ? 1 : 0; }
};

SweepReport sweep(const SweepRequest& request);

// The lines `moesim sweep` prints on stderr at the end: the counts ("sweep: 8 runs (shard 1/1 of
// 8), 0 errors, 0 broken -> FILE.csv"), then the planner's summary or why there is none.
void write_sweep_summary(std::ostream& os, const SweepReport& report);

// `moesim sweep merge OUT.csv SHARD.csv...`: the shards' CSVs in grid order, written atomically.
void sweep_merge(const std::vector<std::string>& shard_paths, const std::string& out_path);

// `moesim sweep plan SWEEP.csv [--plan FILE]`: the planner's table of a finished sweep's CSV,
// also written to plan_path when given.
study::Plan sweep_plan(const std::string& csv_path, const std::optional<std::string>& plan_path);
// "sweep plan:\n" and the planner's summary, and where the table went.
void write_sweep_plan_summary(std::ostream& os, const study::Plan& plan,
                              const std::optional<std::string>& plan_path);

// The planner options `sweep` and `search` share: --gpu-price-per-hour must be > 0 (UsageError);
// --plan must end in .csv or .json in a writable directory (bad input). Exposed for the command
// line, which checks them in its option order.
void check_gpu_price(const std::optional<double>& gpu_price_per_hour);
void check_plan_path(const std::optional<std::string>& plan_path);
// Writes the plan to `path` atomically (CSV or JSON by its extension).
void write_plan_file(const study::Plan& plan, const std::string& path);

}  // namespace moesim::sim::api
