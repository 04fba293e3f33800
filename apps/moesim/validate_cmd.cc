// `moesim validate SCENARIO --profile PROFILE.toml --measurements MEAS.jsonl`: re-simulates the
// steps an engine replay measured, with the calibrated cost model and the recorded routing, and
// reports simulated against measured time per op kind, per phase, per step and end to end
// (sim/api/calibration.h; docs/calibration.md).
//
// `moesim validate SCENARIO --profile PROFILE.toml --serving RUN_DIR... --out DIR`: re-simulates
// the request traces `moesim-engine serve` served and reports the serving figures' errors beside
// the engine's run-to-run spread, per load point, and the saturation knee measured vs predicted.
#include <iostream>

#include "apps/moesim/cli.h"
#include "sim/api/calibration.h"
#include "sim/calibration/serving_report_writers.h"
#include "sim/calibration/validation_writers.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Re-simulates the steps MEAS.jsonl measured (the step trace it names, or --trace) with the\n"
    "calibrated cost model and the recorded routing, and prints simulated vs measured error per\n"
    "op kind, per phase, per step and end to end (TTFT, TPOT, throughput).\n"
    "With --serving RUN_DIR...: re-simulates the request traces the engine's serve runs served\n"
    "(runs of one trace are repeats of one load point) and prints TTFT, TPOT, end-to-end and\n"
    "queueing percentiles, throughput and preemptions, simulated vs the engine's mean and\n"
    "run-to-run spread, and the SLO knee measured vs predicted (docs/calibration.md).";

int validate_serving(const std::string& scenario, const std::optional<std::string>& profile,
                     const std::vector<std::string>& run_dirs, const std::vector<std::string>& sets,
                     const std::optional<std::string>& out_dir, bool json) {
  sim::api::ServingValidateRequest r;
  r.scenario_path = scenario;
  r.profile_path = profile;
  r.run_dirs = run_dirs;
  r.out_dir = out_dir;
  for (const std::string& text : sets)
    r.overrides.push_back(sim::study::parse_override(text, "--set"));
  const sim::ServingComparison report = sim::api::validate_serving(r);
  if (json) {
    sim::write_serving_json(std::cout, report);
  } else {
    sim::write_serving_markdown(std::cout, report);
  }
  return 0;
}

}  // namespace

int validate_command(const std::vector<std::string>& argv) {
  sim::api::ValidateRequest r;
  bool json = false;
  bool serving = false;
  std::vector<std::string> run_dirs, sets;
  CommandLine cl(
      "validate SCENARIO --profile PROFILE.toml (--measurements MEAS.jsonl | --serving RUN_DIR..."
      " --out DIR) [options]",
      kDescription);
  cl.positional("SCENARIO", &r.scenario_path, "the scenario the steps were recorded from")
      .positionals("RUN_DIR", &run_dirs,
                   "with --serving: moesim-engine serve output directories (summary.json, "
                   "requests.csv)")
      .option("--profile", &r.profile_path, "PROFILE.toml", "the calibration profile (required)")
      .option("--measurements", &r.measurements_path, "MEAS.jsonl",
              "an engine replay's measurements (required without --serving)")
      .option("--trace", &r.trace_path, "STEPS.jsonl",
              "the recorded step trace (default: the one the measurements name)")
      .flag("--serving", &serving,
            "validate serving: the RUN_DIRs are serve runs (needs --out for the re-simulations)")
      .option("--set", &sets, "KEY.PATH=VALUE",
              "with --serving: override one scenario value, as the traces were exported with "
              "(repeatable)")
      .option("-o,--out", &r.out_dir, "DIR",
              "also write report.json, report.md, ops.csv, phases.csv, steps.csv (--serving: "
              "report.json, report.md, points.csv, resim/)")
      .flag("--json", &json, "print report.json instead of the table")
      .footer("exit codes: 0 success, 1 an output not written, 2 bad input");
  if (!cl.parse(argv)) return 0;
  if (serving) {
    if (r.measurements_path || r.trace_path) {
      throw UsageError{"--serving compares serve runs: --measurements and --trace do not apply"};
    }
    return validate_serving(r.scenario_path, r.profile_path, run_dirs, sets, r.out_dir, json);
  }
  if (!run_dirs.empty()) {
    throw UsageError{"unexpected argument '" + run_dirs.front() + "' (RUN_DIRs need --serving)"};
  }
  if (!sets.empty()) throw UsageError{"--set applies to --serving only"};
  const sim::ValidationReport report = sim::api::validate(r);
  if (json) {
    sim::write_validation_json(std::cout, report);
  } else {
    sim::write_validation_text(std::cout, report);
  }
  return 0;
}

}  // namespace moesim::cli
