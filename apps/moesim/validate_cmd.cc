// `moesim validate SCENARIO --profile PROFILE.toml --measurements MEAS.jsonl`: re-simulates the
// steps an engine replay measured, with the calibrated cost model and the recorded routing, and
// reports simulated against measured time per op kind, per phase, per step and end to end
// (sim/calibration/resimulate.h, validation.h; docs/calibration.md).
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>

#include "apps/moesim/cli.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/resimulate.h"
#include "sim/calibration/step_trace_reader.h"
#include "sim/calibration/validation.h"
#include "sim/calibration/validation_writers.h"
#include "sim/config/config_error.h"
#include "sim/cost/profile.h"
#include "sim/io/output_files.h"
#include "sim/scenario/scenario.h"

namespace moesim::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDescription =
    "Re-simulates the steps MEAS.jsonl measured (the step trace it names, or --trace) with the\n"
    "calibrated cost model and the recorded routing, and prints simulated vs measured error per\n"
    "op kind, per phase, per step and end to end (TTFT, TPOT, throughput).";

std::string resolve_trace(const std::string& recorded, const std::string& meas_file) {
  if (recorded.empty()) return recorded;
  if (fs::exists(recorded)) return recorded;
  fs::path beside = fs::path(meas_file).parent_path() / fs::path(recorded).filename();
  return fs::exists(beside) ? beside.string() : recorded;
}

void write_file(const fs::path& p, const std::function<void(std::ostream&)>& fn) {
  sim::io::write_file_atomically(p.string(), fn);
}

}  // namespace

int validate_command(const std::vector<std::string>& argv) {
  std::string scenario_path;
  std::optional<std::string> profile_path, meas_path, trace_opt, out_dir;
  bool json = false;
  CommandLine cl("validate SCENARIO --profile PROFILE.toml --measurements MEAS.jsonl [options]",
                 kDescription);
  cl.positional("SCENARIO", &scenario_path, "the scenario the steps were recorded from")
      .option("--profile", &profile_path, "PROFILE.toml", "the calibration profile (required)")
      .option("--measurements", &meas_path, "MEAS.jsonl",
              "an engine replay's measurements (required)")
      .option("--trace", &trace_opt, "STEPS.jsonl",
              "the recorded step trace (default: the one the measurements name)")
      .option("-o,--out", &out_dir, "DIR",
              "also write report.json, report.md, ops.csv, phases.csv, steps.csv")
      .flag("--json", &json, "print report.json instead of the table")
      .footer("exit codes: 0 success, 1 an output not written, 2 bad input");
  if (!cl.parse(argv)) return 0;
  if (!profile_path) throw UsageError{"missing --profile PROFILE.toml"};
  if (!meas_path) throw UsageError{"missing --measurements MEAS.jsonl"};
  std::optional<sim::io::OutputDirLock> out_lock;  // checked and held before any work
  if (out_dir) out_lock.emplace(*out_dir, "--out");

  sim::Scenario sc = sim::load_scenario(scenario_path);
  sim::CalibrationProfile profile = sim::load_profile(*profile_path);
  sim::MeasurementSet meas = sim::read_measurements(*meas_path);
  if (meas.mode != "replay") {
    throw sim::ConfigError(*meas_path, 1, 0, "mode", "validation needs replay measurements");
  }
  std::string trace_path = trace_opt ? *trace_opt : resolve_trace(meas.trace_file, *meas_path);
  if (trace_path.empty()) throw UsageError{"the measurements name no trace_file: give --trace"};
  sim::StepTraceFile trace = sim::read_step_trace(trace_path);
  // `input` points at profile, meas and trace, which outlive it.
  const sim::ValidationInput input = sim::resimulate_recorded_steps(sc, profile, meas, trace);
  sim::ValidationReport report = sim::validate(input);

  if (json) {
    sim::write_validation_json(std::cout, report);
  } else {
    sim::write_validation_text(std::cout, report);
  }
  if (out_dir) {
    fs::path dir(*out_dir);
    write_file(dir / "report.json",
               [&](std::ostream& os) { sim::write_validation_json(os, report); });
    write_file(dir / "report.md",
               [&](std::ostream& os) { sim::write_validation_markdown(os, report); });
    write_file(dir / "ops.csv", [&](std::ostream& os) { sim::write_ops_csv(os, report); });
    write_file(dir / "phases.csv", [&](std::ostream& os) { sim::write_phases_csv(os, report); });
    write_file(dir / "steps.csv", [&](std::ostream& os) { sim::write_steps_csv(os, report); });
  }
  return 0;
}

}  // namespace moesim::cli
