// The calibration commands (docs/calibration.md): `moesim calibrate` fits a cost-model profile
// from engine measurements, `moesim validate` re-simulates measured steps with a profile and
// reports the error, `moesim derive-profile` carries a fitted profile to another GPU by hardware
// ratios.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/calibration/calibrate.h"
#include "sim/calibration/serving_comparison.h"
#include "sim/calibration/validation.h"
#include "sim/cost/profile.h"
#include "sim/study/overrides.h"

namespace moesim::sim::api {

struct CalibrateRequest {
  std::vector<std::string> measurement_paths;  // engine measurements (JSONL)
  std::optional<std::string> out_path;         // the profile to write (required)
  std::optional<std::string> name;             // default: BACKEND-DEVICE
  std::optional<int64_t> max_segments;         // regimes per fit, >= 1 (default 3)
  std::optional<int64_t> min_samples;          // >= 2 (default 6)
  std::optional<double> min_size_gap;          // > 1, or 0: never (default 4)
  std::optional<double> max_spread;            // > 0 (default: keep all records)
  std::optional<std::string> topology_path;    // fit the network and the kernels against it
  std::vector<std::string> nccl_tests;         // nccl-tests alltoall_perf outputs (needs topology)
  std::optional<int64_t> nccl_ranks;           // >= 2 (default: counted from the outputs)
  std::function<void(int64_t, int64_t)> progress;  // (fits done, fits in all)
};

struct CalibrateResult {
  CalibrateReport report;
  std::string out_path;
};

// Checks the request, fits and writes the profile (atomically). UsageError when no op kind and
// no link class had enough records to fit.
CalibrateResult calibrate(const CalibrateRequest& request);
nlohmann::json calibrate_json(const CalibrateResult& result);
void write_calibrate_text(std::ostream& os, const CalibrateResult& result);

struct ValidateRequest {
  std::string scenario_path;
  std::optional<std::string> profile_path;       // required
  std::optional<std::string> measurements_path;  // an engine replay's (required)
  std::optional<std::string> trace_path;         // default: the trace the measurements name
  std::optional<std::string> out_dir;  // report.json, report.md, ops.csv, phases.csv, steps.csv
};

// Locks out_dir first, re-simulates the measured steps and writes the reports when asked.
// Text and JSON: sim/calibration/validation_writers.h.
ValidationReport validate(const ValidateRequest& request);

// `moesim validate SCENARIO --profile PROFILE.toml --serving RUN_DIR... --out DIR`: serve runs of
// `moesim-engine serve` against the simulator's re-simulation of the same request traces
// (sim/calibration/serving_comparison.h; docs/calibration.md, "Serving validation").
struct ServingValidateRequest {
  std::string scenario_path;
  std::optional<std::string> profile_path;  // required
  std::vector<std::string> run_dirs;        // serve runs' --out directories (>= 1)
  // Applied to the scenario (as `moesim run --set`) before its workload is replaced by each
  // load point's request trace: the setting the traces were exported and served with.
  std::vector<study::Override> overrides;
  std::optional<std::string> out_dir;  // required: report.json, report.md, points.csv, resim/
};

// Locks out_dir, reads the runs (ConfigError naming the file and key or row), groups them by the
// trace they served (one load point per trace), re-simulates each trace with the profile until
// every request has completed (run.duration_s doubled from twice the engine's longest run, up to
// 1e7 s), writing the re-simulation's requests.csv and summary.json under out_dir/resim/N-NAME/,
// compares (compare_serving, the scenario's [slo] limits) and writes the reports.
ServingComparison validate_serving(const ServingValidateRequest& request);

struct DeriveProfileRequest {
  std::string from_path;                            // a fitted profile
  std::optional<std::string> source_topology_path;  // what it was fitted on (required)
  std::optional<std::string> topology_path;         // what to derive for (required)
  std::optional<std::string> out_path;              // required
  std::optional<std::string> name;                  // default: FROM's name + "-derived-" + GPU
};

struct DerivedProfile {
  CalibrationProfile profile;
  std::string derivation;  // the GPUs and the ratios of their peaks and line rates
  std::string out_path;
};

// Derives and writes the profile. UsageError for a profile ratios cannot carry (engine op fits,
// measured collectives, a derived one) or a source topology it was not fitted on.
DerivedProfile derive_profile(const DeriveProfileRequest& request);
// "moesim derive-profile: NAME\n  DERIVATION\n  wrote PATH\n".
void write_derive_profile_text(std::ostream& os, const DerivedProfile& derived);

}  // namespace moesim::sim::api
