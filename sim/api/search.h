// `moesim search`: for each configuration of a grid, the highest request rate that meets the SLOs
// (sim/study/search.h), the planner's table, and the cheapest configuration sustaining a target
// rate; with a journal that a killed search resumes from, and over the ranks of an MPI job.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/study/planner.h"
#include "sim/study/rank_group.h"
#include "sim/study/search.h"

namespace moesim::sim::api {

struct SearchRequest {
  std::string scenario_path;
  std::optional<std::string> slo;           // LIMITS: "ttft_p99_ms=2000,tpot_p99_ms=100" (required)
  std::optional<std::string> grid_path;     // a sweep file's [[parameters]] grid
  std::optional<double> target_rate_per_s;  // > 0: name the cheapest configuration sustaining it
  std::optional<double> min_attainment;     // in [0, 1] (default 0.99)
  std::optional<int64_t> seed;              // >= 0 (default: each configuration's [run] seed)
  std::optional<double> tolerance;          // in (0, 1] (default 0.02)
  std::optional<int64_t> max_doublings;     // 0..30 (default 10)
  // 1..100 (default 3): seeds searched per configuration, for the interval on its max rate.
  std::optional<int64_t> replications;
  // In [1, 100] (default 5): a probe not converged by run.duration_s runs on up to this factor.
  std::optional<double> max_duration_factor;
  std::optional<int64_t> threads;            // 1..4096 (default: hardware threads)
  std::optional<std::string> journal_path;   // one fsync'd line per searched configuration
  bool resume = false;                       // take the journal's configurations (needs it)
  std::optional<double> gpu_price_per_hour;  // > 0 (default: the topology's [gpu] price)
  std::optional<std::string> plan_path;      // the planner's table, .csv or .json
  bool probe_infeasible = false;  // probe configurations diagnosed infeasible at any rate
  bool full_probes = false;       // run every probe to its end
  std::function<void(int64_t, int64_t)> progress;  // (configurations done, in all)
  // The MPI job the search is split over (rank r searches configurations r, r + N, ...; rank 0
  // gathers them); null: this process alone.
  const study::RankGroup* ranks = nullptr;
};

struct SearchReport {
  std::string scenario_path;
  bool grid = false;  // searched a grid (the parameters are shown)
  study::SearchSlo slo;
  std::optional<double> target_rate_per_s;
  bool probe_infeasible = false;
  study::SearchResult result;
  study::Plan plan;
  std::optional<std::string> plan_path;
  size_t num_resumed = 0;  // configurations taken from the journal
  std::optional<std::string> journal_path;
  bool is_root = true;  // false on MPI ranks other than 0: nothing else is filled
};

SearchReport search(const SearchRequest& request);

// `moesim search --json`'s document: every configuration with its probes and diagnosis, the
// planner's figures, the feasible and Pareto sets and the cheapest configuration.
nlohmann::json search_json(const SearchReport& report);
// The table: per configuration its max rate, multipliers, throughput per GPU, cost and first
// failing rate; the diagnosis before it, the planner's summary and the cheapest after it.
void write_search_text(std::ostream& os, const SearchReport& report);

}  // namespace moesim::sim::api
