// The capacity planner's figures, one set of definitions for `moesim sweep` and `moesim search`:
// tokens per second per GPU and per user (interactivity: 1000 / TPOT p50 in ms, the "tok/s/user"
// of InferenceMAX), GPU-hours and US dollars per million input and output tokens (the
// price from --gpu-price-per-hour or the topology's [gpu] price_usd_per_hour, else no dollar
// figure: never a placeholder price), feasibility against the SLO limits (SloVerdict), the Pareto
// frontier over (cost, TTFT p99, TPOT p99) and the cheapest feasible configuration. Each
// definition, with its ties and the plan file's columns: docs/sweeps.md, "Planner outputs".
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"

namespace moesim::sim::study {

struct GpuPrice {
  std::optional<double> usd_per_hour;  // one GPU-hour, > 0; absent: no price known
  std::string source;                  // "flag", "topology", or "" without a price
};
// `flag_usd_per_hour` when given (source "flag"), else the topology's [gpu] price_usd_per_hour
// (source "topology"), else no price.
GpuPrice gpu_price(const Scenario& scenario, std::optional<double> flag_usd_per_hour);

// Per-GPU throughput and cost of a throughput on num_gpus GPUs (see the file comment). Each
// figure is absent where it has no data: a throughput that was not measured, a cost of 0 tokens/s
// (infinite), dollars without a price.
struct CostFigures {
  std::optional<double> input_tokens_per_s_per_gpu, output_tokens_per_s_per_gpu;
  std::optional<double> gpu_hours_per_m_input_tokens, gpu_hours_per_m_output_tokens;
  std::optional<double> usd_per_m_input_tokens, usd_per_m_output_tokens;
};
CostFigures cost_figures(int64_t num_gpus, std::optional<double> input_tokens_per_s,
                         std::optional<double> output_tokens_per_s, const GpuPrice& price);

// Output tokens per second per user (interactivity): 1000 / tpot_p50_ms, the decode speed the
// median request sees; absent without a TPOT (or at a TPOT of 0).
std::optional<double> tokens_per_s_per_user(std::optional<double> tpot_p50_ms);

// One configuration in the planner's table. Sweep: means over the configuration's runs (seeds)
// with status ok; search: the figures of the probe at the highest rate that met the SLOs.
struct PlanEntry {
  int64_t config_idx = 0;
  std::vector<std::string> parameter_values;  // one per grid parameter, as given
  std::string parameters;                     // "key=value, ..." for people
  std::string error;  // non-empty: the configuration did not run (does not parse or fit)
  int64_t num_gpus = 0;
  int64_t num_runs = 0;  // sweep: runs with status ok; search: probes
  GpuPrice price;
  std::optional<double> rate_per_s;  // sweep: completed requests/s; search: max rate meeting
  std::optional<double> input_tokens_per_s, output_tokens_per_s;
  std::optional<double> ttft_p99_ms, tpot_p99_ms;
  std::optional<double> tpot_p50_ms;                   // sweep: mean over the runs
  std::optional<double> output_tokens_per_s_per_user;  // tokens_per_s_per_user(tpot_p50_ms)
  std::optional<double> slo_attainment;  // met / decided (sweep: pooled over the runs)
  // Sweep with two runs (seeds) or more: the Student-t 95% half-widths of the means above
  // (sim/study/replications.h), absent with one.
  std::optional<double> output_tokens_per_s_half_width, ttft_p99_ms_half_width;
  bool feasible = false;
  std::string infeasible_reason;  // why not feasible ("" when feasible)
  bool pareto = false;            // set by mark_pareto
  CostFigures cost;               // from num_gpus, the throughputs and price
};

// Whether the cost axis of `entries` is US dollars: every entry that has a cost per million
// output tokens has a price (and one has a cost). Otherwise GPU-hours.
bool cost_axis_is_usd(const std::vector<PlanEntry>& entries);
// The entry's cost per million output tokens on that axis; absent without one.
std::optional<double> cost_on_axis(const PlanEntry& entry, bool usd);

// Sets `pareto` on the frontier (see the file comment); entries with an error or without all
// three figures are never on it.
void mark_pareto(std::vector<PlanEntry>& entries);
// The index of the cheapest feasible entry (see the file comment); absent when none is feasible
// with a cost.
std::optional<size_t> cheapest_feasible(const std::vector<PlanEntry>& entries);

// The planner's table as a document. `command` is "sweep" or "search"; `limits` are the SLO
// limits and `feasible_rule` what feasible means with them (sweep: every run meets them; search:
// some probed rate meets them, or with --target-rate the max rate reaches the target);
// `cheapest` indexes `entries`; `cheapest_rule` says how it was chosen.
struct Plan {
  std::string command;
  std::string limits;
  std::string feasible_rule;
  std::vector<std::string> parameter_keys;
  std::vector<PlanEntry> entries;  // grid order
  std::optional<size_t> cheapest;
  std::string cheapest_rule;
};

// CSV: one row per configuration, columns config_idx, the parameters, status, error, num_gpus,
// num_runs, rate_per_s, the throughputs and their per-GPU figures, tpot_p50_ms,
// output_tokens_per_s_per_user, gpu_price_per_hour, gpu_price_source, GPU-hours and dollars per
// million tokens, ttft_p99_ms, tpot_p99_ms, slo_attainment, feasible, infeasible_reason, pareto,
// cheapest (docs/sweeps.md). Numbers as the sweep CSV writes them; an empty cell where a figure
// has no data.
void write_plan_csv(const Plan& plan, std::ostream& out);
// JSON: {"command", "limits", "feasible_rule", "cost_axis", "pareto_axes", "cheapest_rule",
// "configs": [...], "feasible": [config_idx...], "pareto": [config_idx...], "cheapest_feasible":
// {...} | null}.
void write_plan_json(const Plan& plan, std::ostream& out);
// A few lines for people: how many configurations are feasible and what that means, which are on
// the frontier (of every configuration that ran, feasible or not, with how many of them are
// feasible), the cheapest feasible one with its cost and tokens/s per GPU and per user, and what
// the cost is in (or why dollars are missing).
std::string plan_summary_text(const Plan& plan);

// write_plan_csv for a `path` ending in ".csv", write_plan_json for ".json".
void write_plan(const Plan& plan, const std::string& path, std::ostream& out);
// Throws ConfigError (file `option`) unless `path` ends in .csv or .json.
void check_plan_path(const std::string& path, const std::string& option);

}  // namespace moesim::sim::study
