// `moesim run`: one simulation of a scenario, its summary, and the outputs it writes when asked
// (--out DIR, --record FILE, --export-requests FILE: sim/output/run_files.h). Output paths are
// checked, and the output directory locked, before the simulation starts.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/api/load.h"
#include "sim/serving/cluster.h"
#include "sim/study/infeasibility.h"
#include "sim/study/replications.h"
#include "sim/study/slo_limits.h"

namespace moesim::sim::api {

struct RunResult;

struct RunRequest {
  ScenarioSource scenario;
  std::optional<int64_t> seed;             // root seed, >= 0 (default: the scenario's [run] seed)
  std::optional<double> duration_s;        // in [1e-6, 1e7] (default: [run] duration_s)
  std::optional<std::string> fidelity;     // "exact" or "fast" (default: run.fidelity)
  std::optional<int64_t> fidelity_check;   // > 0: also time every N-th step on the other fidelity
  std::optional<std::string> out_dir;      // summary.json, requests.csv, steps.csv, trace.json,
                                           // resolved/ (docs/outputs.md)
  std::optional<std::string> record_path;  // the executed steps as JSONL (exact fidelity)
  std::optional<int64_t> record_steps;     // > 0 (default: [outputs] record_max_steps)
  // Every arrival as the request trace (docs/schemas/request_trace.md), what the engine serves.
  std::optional<std::string> export_requests_path;
  // The Chrome trace's window in simulated seconds, 0 <= start <= end <= 1e7 (needs out_dir).
  std::optional<std::pair<double, double>> trace_window_s;
  // After the run, say which requests no rate could serve within the scenario's [slo].
  bool diagnose = false;
  // 1..1000: also run seeds seed + 1 .. seed + N - 1 (in parallel on `threads`) and report each
  // headline figure's mean and 95% interval over the N runs (sim/study/replications.h).
  std::optional<int64_t> replications;
  std::optional<int64_t> threads;  // 1..4096 (default: hardware threads)
  // Called once the simulation and the diagnosis are done, before the outputs are written (the
  // command line prints the summary there, so a failed write comes after it).
  std::function<void(const RunResult&)> on_finished;
};

struct RunResult {
  Scenario scenario;  // as run: overrides, duration and fidelity applied
  RunOutput output;
  uint64_t seed = 0;  // the root seed used
  double wall_s = 0;  // wall time of the simulation
  std::optional<study::Diagnosis> diagnosis;
  study::SearchSlo diagnosis_slo;  // the limits the diagnosis used
  // RunRequest::replications > 1: every seed's summary (the first is output's), and the
  // figures' intervals over them.
  std::vector<uint64_t> replication_seeds;
  std::vector<RunSummary> replication_summaries;
  std::vector<study::FigureInterval> replication_figures;

  // 0, or 1 when conservation broke (the command line's exit code).
  int exit_code() const { return output.conservation_ok ? 0 : 1; }
};

// Checks the request (UsageError), loads the scenario (ConfigError), simulates it with its
// policies, diagnoses it when asked, calls on_finished and writes the outputs (OutputError when
// one cannot be written).
RunResult run(const RunRequest& request);

// `moesim run --json`: summary.json's document plus wall_s (and the diagnosis).
nlohmann::json run_json(const RunResult& result);
// The summary table, the wall time and the diagnosis (or a hint to ask for one).
void write_run_text(std::ostream& os, const RunResult& result);

}  // namespace moesim::sim::api
