// `moesim validate --serving`: the engine's serve runs against re-simulations of the same request
// traces. Each trace is re-simulated with the scenario (its --set overrides applied), priced by
// the profile exactly as step validation prices it (calibrated_scenario), its workload replaced
// by the trace ([workload] kind = "request_trace") and the trace header's seed, so the
// simulator sees the arrivals the engine served and routes as the exported run did.
//
// The engine serves every request to completion, so the re-simulation must too: a run's
// duration bounds it (requests still running at run.duration_s end in flight), and no setting
// runs "until drained". The duration starts at twice the engine's longest run of the trace and
// doubles until no request is left in flight; events before the end do not depend on where the
// end lies, so this is the run to completion.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/json_number.h"
#include "sim/api/calibration.h"
#include "sim/api/load.h"
#include "sim/api/serving_runs.h"
#include "sim/api/usage_error.h"
#include "sim/calibration/resimulate.h"
#include "sim/calibration/serving_report_writers.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/io/output_files.h"
#include "sim/io/output_locks.h"
#include "sim/output/run_outputs.h"
#include "sim/output/run_summary.h"
#include "sim/study/simulate.h"

namespace moesim::sim::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kRequestTraceSchema = "moesim.request_trace.v1";
constexpr double kMaxDurationS = 1e7;  // run.duration_s's range

// A trace path as a serve summary names it: as written when it exists, else beside the run
// directory (the experiment's layout when it was moved).
std::string resolve_trace(const ServingRun& run) {
  std::error_code ec;
  if (fs::exists(run.trace, ec)) return fs::absolute(run.trace).string();
  const fs::path beside = fs::path(run.dir).parent_path() / fs::path(run.trace).filename();
  if (fs::exists(beside, ec)) return fs::absolute(beside).string();
  throw ConfigError((fs::path(run.dir) / "summary.json").string(), 0, 0, "trace",
                    "the request trace '" + run.trace + "' is neither there nor beside " + run.dir);
}

// The trace header's seed: the exported run's, which the re-simulation routes with.
uint64_t trace_seed(const std::string& path) {
  const std::string first_line =
      read_input_stream(path, InputKind::kData, "file not found", [](std::istream& in) {
        std::string line;
        std::getline(in, line);
        return line;
      });
  json j;
  try {
    j = parse_json(first_line);
  } catch (const JsonDepthError& e) {
    throw ConfigError(path, 1, 0, "", e.what());
  } catch (const json::exception& e) {
    throw ConfigError(path, 1, 0, "", "malformed JSON: " + json_exception_reason(e));
  }
  if (!j.is_object() || j.value("record", "") != "header") {
    throw ConfigError(path, 1, 0, "record", "the first record must be the header");
  }
  if (j.value("schema", "") != kRequestTraceSchema) {
    throw ConfigError(path, 1, 0, "schema",
                      std::string("not a request trace (") + kRequestTraceSchema + ")");
  }
  const auto seed = j.find("seed");
  const std::optional<int64_t> v =
      seed != j.end() && seed->is_number_integer() ? json_integer<int64_t>(*seed) : std::nullopt;
  if (!v || *v < 0) throw ConfigError(path, 1, 0, "seed", "missing, or not an integer >= 0");
  return static_cast<uint64_t>(*v);
}

// The longest of the engine's runs of one trace, from the first arrival to the last completion
// (or arrival), in seconds.
double longest_run_s(const std::vector<ServingRun>& runs) {
  int64_t longest_ns = 0;
  for (const ServingRun& r : runs) {
    for (const ServedRequest& q : r.requests) {
      longest_ns = std::max({longest_ns, q.arrival_ns, q.done_ns});
    }
  }
  return static_cast<double>(longest_ns) / 1e9;
}

int64_t num_in_flight(const RunOutput& out) {
  return std::count_if(out.requests.begin(), out.requests.end(), [](const RequestRecord& r) {
    return r.outcome == RequestOutcome::kInFlight;
  });
}

// The re-simulation of one load point, written under `dir` and read back as the engine's runs
// are.
ServingRun resimulate(const ServingValidateRequest& request, const CalibrationProfile& profile,
                      const std::vector<ServingRun>& engine, const fs::path& dir) {
  const std::string trace = resolve_trace(engine.front());
  ScenarioSource source;
  source.path = request.scenario_path;
  source.dropped = {"workload"};
  source.overrides = request.overrides;
  source.overrides.push_back({"workload.kind", std::string("request_trace")});
  source.overrides.push_back({"workload.path", trace});
  Scenario sc = calibrated_scenario(load(source).scenario, profile);
  // The run ends where this loop says: no extension, no warm-up cut that could exceed it.
  sc.run.max_duration_s.reset();
  sc.run.steady.warmup_s.reset();
  const uint64_t seed = trace_seed(trace);
  sc.run.duration_s = std::clamp(2 * longest_run_s(engine), 1.0, kMaxDurationS);
  RunOutput out = study::simulate(sc, seed, /*keep_requests=*/true);
  while (num_in_flight(out) > 0 && sc.run.duration_s < kMaxDurationS) {
    sc.run.duration_s = std::min(2 * sc.run.duration_s, kMaxDurationS);
    out = study::simulate(sc, seed, /*keep_requests=*/true);
  }
  io::ensure_output_dir(dir.string(), "--out");
  const std::string csv = (dir / "requests.csv").string();
  io::write_file_atomically(csv, [&](std::ostream& os) { output::write_requests_csv(os, out); });
  io::write_file_atomically((dir / "summary.json").string(), [&](std::ostream& os) {
    os << output::summary_json(sc, out, seed).dump(2) << "\n";
  });
  ServingRun run;
  run.dir = dir.string();
  run.trace = engine.front().trace;
  run.requests = read_requests_csv(csv);
  return run;
}

// Every run of a load point served the same arrivals: as many rows as the first.
void check_group(const std::vector<ServingRun>& runs, const std::string& scenario_name) {
  for (const ServingRun& r : runs) {
    if (r.scenario != scenario_name) {
      throw ConfigError(
          (fs::path(r.dir) / "summary.json").string(), 0, 0, "scenario",
          "'" + r.scenario + "' differs from the scenario's name '" + scenario_name + "'");
    }
    if (r.requests.size() != runs.front().requests.size()) {
      throw ConfigError((fs::path(r.dir) / "requests.csv").string(), 0, 0, "",
                        std::to_string(r.requests.size()) + " requests, but " + runs.front().dir +
                            " (the same trace) has " +
                            std::to_string(runs.front().requests.size()));
    }
  }
}

// "N-STEM": the point's position among the traces as given, and the trace's file name stem.
std::string point_label(size_t i, const std::string& trace) {
  std::string stem = fs::path(trace).stem().string();
  for (char& ch : stem) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') {
      ch = '_';
    }
  }
  return std::to_string(i) + "-" + stem;
}

}  // namespace

ServingComparison validate_serving(const ServingValidateRequest& request) {
  if (!request.profile_path) throw UsageError{"missing --profile PROFILE.toml"};
  if (request.run_dirs.empty()) throw UsageError{"--serving needs at least one RUN_DIR"};
  if (!request.out_dir) throw UsageError{"--serving needs --out DIR (the re-simulations go there)"};
  const io::OutputDirLock out_lock(*request.out_dir, "--out");  // before any work

  ScenarioSource base;
  base.path = request.scenario_path;
  base.overrides = request.overrides;
  const Scenario sc = load(base).scenario;
  const CalibrationProfile profile = load_profile(*request.profile_path);
  std::vector<ServingRun> runs;
  for (const std::string& dir : request.run_dirs) runs.push_back(read_serving_run(dir));
  const std::vector<std::vector<ServingRun>> groups = group_by_trace(std::move(runs));

  std::vector<LoadPointRuns> points;
  for (size_t i = 0; i < groups.size(); ++i) {
    check_group(groups[i], sc.name);
    const fs::path dir =
        fs::path(*request.out_dir) / "resim" / point_label(i, groups[i].front().trace);
    LoadPointRuns p;
    p.engine = groups[i];
    p.simulated = resimulate(request, profile, groups[i], dir);
    points.push_back(std::move(p));
  }
  ServingComparison c = compare_serving(points, {sc.slo.ttft_ms, sc.slo.tpot_ms});
  c.scenario = sc.name;
  const fs::path out(*request.out_dir);
  io::write_file_atomically((out / "report.json").string(),
                            [&](std::ostream& os) { write_serving_json(os, c); });
  io::write_file_atomically((out / "report.md").string(),
                            [&](std::ostream& os) { write_serving_markdown(os, c); });
  io::write_file_atomically((out / "points.csv").string(),
                            [&](std::ostream& os) { write_serving_points_csv(os, c); });
  return c;
}

}  // namespace moesim::sim::api
