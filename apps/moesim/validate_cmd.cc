// `moesim validate SCENARIO --profile PROFILE.toml --measurements MEAS.jsonl`: re-simulates the
// steps an engine replay measured, with the calibrated cost model and the recorded routing, and
// reports simulated against measured time per op kind, per phase, per step and end to end
// (sim/api/calibration.h; docs/calibration.md).
#include <iostream>

#include "apps/moesim/cli.h"
#include "sim/api/calibration.h"
#include "sim/calibration/validation_writers.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Re-simulates the steps MEAS.jsonl measured (the step trace it names, or --trace) with the\n"
    "calibrated cost model and the recorded routing, and prints simulated vs measured error per\n"
    "op kind, per phase, per step and end to end (TTFT, TPOT, throughput).";

}  // namespace

int validate_command(const std::vector<std::string>& argv) {
  sim::api::ValidateRequest r;
  bool json = false;
  CommandLine cl("validate SCENARIO --profile PROFILE.toml --measurements MEAS.jsonl [options]",
                 kDescription);
  cl.positional("SCENARIO", &r.scenario_path, "the scenario the steps were recorded from")
      .option("--profile", &r.profile_path, "PROFILE.toml", "the calibration profile (required)")
      .option("--measurements", &r.measurements_path, "MEAS.jsonl",
              "an engine replay's measurements (required)")
      .option("--trace", &r.trace_path, "STEPS.jsonl",
              "the recorded step trace (default: the one the measurements name)")
      .option("-o,--out", &r.out_dir, "DIR",
              "also write report.json, report.md, ops.csv, phases.csv, steps.csv")
      .flag("--json", &json, "print report.json instead of the table")
      .footer("exit codes: 0 success, 1 an output not written, 2 bad input");
  if (!cl.parse(argv)) return 0;
  const sim::ValidationReport report = sim::api::validate(r);
  if (json) {
    sim::write_validation_json(std::cout, report);
  } else {
    sim::write_validation_text(std::cout, report);
  }
  return 0;
}

}  // namespace moesim::cli
