// A sweep file (docs/sweeps.md): a scenario, [[parameters]] whose values make a grid of
// configurations (the cartesian product; the first parameter varies slowest), and seeds or a
// number of replications. A parameter `linked_to` an earlier one is no dimension of its own: its
// values advance in lockstep with that parameter's (replicas = [2, 3, 4] with prefill replicas =
// [1, 2, 3] gives three configurations, not nine), so configurations that cannot exist are never
// made. Read and checked here, against the scenario too; the runs and their CSV are sweep.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/study/overrides.h"

namespace moesim::sim::study {

struct SweepParameter {
  std::string key_path;               // dotted key path into the scenario
  std::vector<OverrideValue> values;  // non-empty, one TOML type (integers and floats: floats)
  int32_t line = 0;                   // line of `key` in the sweep file
  std::vector<int32_t> value_lines;   // line of each value
  // Index of the earlier parameter whose values this one's advance with (same count); absent: a
  // dimension of the grid of its own.
  std::optional<size_t> linked_to;
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
// (integer >= 1), and [[parameters]] tables with `key` (string), `values` (non-empty array of
// scalars) and optionally `linked_to` (the key of an earlier parameter with as many values).
// Errors are ConfigErrors naming the sweep file, line and key.
SweepSpec load_sweep(const std::string& path,
                     const std::optional<std::string>& scenario_path = std::nullopt);

// Checks the parameters against the scenario: the base scenario must load, and each value,
// applied alone, must name a key the scenario (or its policy's table) knows, with a value of the
// right type. Errors are ConfigErrors at the value's line in the sweep file, carrying the
// scenario parser's reason. Range and feasibility errors, which may depend on the other values of
// a configuration, are left to the runs (their rows get status "error").
void check_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario);

// The grid's configurations in grid order (the first dimension slowest; a linked parameter takes
// the value at its dimension's index): one override per parameter, in parameter order.
std::vector<std::vector<Override>> grid_configs(const SweepSpec& spec);
// Runs per configuration: seeds.size(), or num_replications.
int64_t runs_per_config(const SweepSpec& spec);
// Configurations of the grid: the product of the dimensions' value counts.
int64_t num_grid_configs(const SweepSpec& spec);
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

}  // namespace moesim::sim::study
