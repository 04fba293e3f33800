#include <filesystem>

#include "sim/api/calibration.h"
#include "sim/api/usage_error.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/resimulate.h"
#include "sim/calibration/step_trace_reader.h"
#include "sim/calibration/validation_writers.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"
#include "sim/scenario/scenario.h"

namespace moesim::sim::api {
namespace {

namespace fs = std::filesystem;

// The step trace the measurements name: as written, else beside the measurements file.
std::string resolve_trace(const std::string& recorded, const std::string& meas_file) {
  if (recorded.empty()) return recorded;
  // Non-throwing: a recorded name beyond the path limits is reported when it is read.
  std::error_code ec;
  if (fs::exists(recorded, ec)) return recorded;
  fs::path beside = fs::path(meas_file).parent_path() / fs::path(recorded).filename();
  return fs::exists(beside, ec) ? beside.string() : recorded;
}

void write_reports(const fs::path& dir, const ValidationReport& report) {
  auto write = [&](const char* name, void (*fn)(std::ostream&, const ValidationReport&)) {
    io::write_file_atomically((dir / name).string(), [&](std::ostream& os) { fn(os, report); });
  };
  write("report.json", write_validation_json);
  write("report.md", write_validation_markdown);
  write("ops.csv", write_ops_csv);
  write("phases.csv", write_phases_csv);
  write("steps.csv", write_steps_csv);
}

}  // namespace

ValidationReport validate(const ValidateRequest& request) {
  if (!request.profile_path) throw UsageError{"missing --profile PROFILE.toml"};
  if (!request.measurements_path) throw UsageError{"missing --measurements MEAS.jsonl"};
  std::optional<io::OutputDirLock> out_lock;  // checked and held before any work
  if (request.out_dir) out_lock.emplace(*request.out_dir, "--out");

  const Scenario sc = load_scenario(request.scenario_path);
  const CalibrationProfile profile = load_profile(*request.profile_path);
  const std::string& meas_path = *request.measurements_path;
  const MeasurementSet meas = read_measurements(meas_path);
  if (meas.mode != "replay") {
    throw ConfigError(meas_path, 1, 0, "mode", "validation needs replay measurements");
  }
  const std::string trace_path =
      request.trace_path ? *request.trace_path : resolve_trace(meas.trace_file, meas_path);
  if (trace_path.empty()) throw UsageError{"the measurements name no trace_file: give --trace"};
  const StepTraceFile trace = read_step_trace(trace_path);
  // `input` points at profile, meas and trace, which outlive it.
  const ValidationInput input = resimulate_recorded_steps(sc, profile, meas, trace);
  ValidationReport report = sim::validate(input);
  if (request.out_dir) write_reports(*request.out_dir, report);
  return report;
}

}  // namespace moesim::sim::api
