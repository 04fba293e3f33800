#include "sim/api/run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/api/usage_error.h"
#include "sim/output/run_summary.h"
#include "sim/study/simulate.h"
#include "tests/sim/api/usage_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::api {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

std::string usage_error(const RunRequest& request) {
  return testing::usage_error_of([&] { run(request); });
}

RunRequest tiny() {
  RunRequest r;
  r.scenario.path = kTiny;
  return r;
}

TEST(ApiRun, IsTheStudiesSimulationWithTheRequestedSeedAndDuration) {
  RunRequest r = tiny();
  r.seed = 5;
  r.duration_s = 1.0;
  const RunResult result = run(r);
  Scenario sc = load_scenario(kTiny);
  sc.run.duration_s = 1.0;
  EXPECT_EQ(result.output.digest_hex, study::simulate(sc, 5).digest_hex);
  EXPECT_EQ(result.seed, 5u);
  EXPECT_EQ(result.exit_code(), 0);
  const nlohmann::json j = run_json(result);
  EXPECT_EQ(j.at("event_digest"), result.output.digest_hex);
  EXPECT_EQ(j.at("wall_s"), result.wall_s);
  EXPECT_FALSE(j.contains("diagnosis"));
  std::ostringstream text;
  write_run_text(text, result);
  EXPECT_NE(text.str().find(result.output.digest_hex), std::string::npos);
  EXPECT_NE(text.str().find("wall time"), std::string::npos);
}

TEST(ApiRun, ChecksTheRequestBeforeAnyWork) {
  RunRequest r = tiny();
  r.seed = -1;
  EXPECT_EQ(usage_error(r), "--seed must be >= 0");
  r = tiny();
  r.duration_s = 1e300;
  EXPECT_EQ(usage_error(r), "--duration must be in [1e-6, 1e7] seconds (run.duration_s's range)");
  r = tiny();
  r.fidelity = "medium";
  EXPECT_EQ(usage_error(r), "--fidelity wants exact or fast");
  r = tiny();
  r.fidelity = "fast";
  r.record_path = scratch::path("steps.jsonl");
  EXPECT_NE(usage_error(r).find("--record needs the exact fidelity"), std::string::npos);
  r = tiny();
  r.trace_window_s = std::pair{0.0, 0.1};
  EXPECT_EQ(usage_error(r), "--trace-window needs --out DIR (the trace is DIR/trace.json)");
  r.out_dir = scratch::path("out");
  r.trace_window_s = std::pair{0.2, 0.1};
  EXPECT_EQ(usage_error(r), "--trace-window wants 0 <= START <= END <= 1e7");
  EXPECT_FALSE(fs::exists(r.out_dir.value()));
}

TEST(ApiRun, TheSummaryComesBeforeTheOutputsAreWritten) {
  RunRequest r = tiny();
  r.out_dir = scratch::path("out");
  fs::remove_all(*r.out_dir);  // an earlier run's summary.json would pass for this one's
  r.scenario.overrides = {study::parse_override("scheduler.max_seqs=8", "--set")};
  bool called = false;
  r.on_finished = [&](const RunResult& result) {
    called = true;
    EXPECT_EQ(result.scenario.scheduler.max_seqs, 8);
    EXPECT_FALSE(fs::exists(fs::path(*r.out_dir) / "summary.json"));
  };
  const RunResult result = run(r);
  EXPECT_TRUE(called);
  std::ifstream in(fs::path(*r.out_dir) / "summary.json");
  std::ostringstream summary;
  summary << in.rdbuf();
  EXPECT_EQ(summary.str(),
            output::summary_json(result.scenario, result.output, result.seed).dump(2) + "\n");
  // resolved/scenario.toml is the scenario with the override.
  std::ifstream resolved(fs::path(*r.out_dir) / "resolved/scenario.toml");
  std::ostringstream text;
  text << resolved.rdbuf();
  EXPECT_NE(text.str().find("max_seqs = 8"), std::string::npos);
}

TEST(ApiRun, DiagnosesTheRunsRequestsWhenAsked) {
  RunRequest r = tiny();
  r.diagnose = true;
  const RunResult result = run(r);
  ASSERT_TRUE(result.diagnosis.has_value());
  EXPECT_TRUE(result.diagnosis->done);
  const nlohmann::json j = run_json(result);
  EXPECT_EQ(j.at("diagnosis").at("limits"), "ttft_p99_ms<=200, tpot_p99_ms<=20, attainment>=0.99");
  std::ostringstream text;
  write_run_text(text, result);
  EXPECT_NE(text.str().find("diagnosis ("), std::string::npos);
}

}  // namespace
}  // namespace moesim::sim::api
