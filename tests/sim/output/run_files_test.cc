// The files of one run (`moesim run --out DIR --record FILE`): what RunFiles streams during the
// run and commits after it equals what the writers give for a run that kept everything.
#include "sim/output/run_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/config/config_error.h"
#include "tests/sim/serving/test_scenarios.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::output {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RunFiles, StreamsAndCommitsEveryOutput) {
  const Scenario& sc = testing::test_scenario("tiny_agent");
  const fs::path dir = scratch::path("out");
  fs::remove_all(dir);  // a file left by an earlier run of the test would pass for this run's
  const std::string record = scratch::path("steps.jsonl");
  RunOptions opt;
  opt.chrome_trace = sc.outputs.chrome_trace;
  opt.record_steps = true;
  opt.record_max_steps = 20;
  RunFiles files(sc, dir.string(), record, opt);
  EXPECT_TRUE(fs::is_directory(dir / "resolved"));
  ASSERT_EQ(opt.request_sinks.size(), 1u);
  const RunOutput out = run_scenario(sc, opt, 4);
  EXPECT_FALSE(fs::exists(dir / "summary.json"));  // nothing final before the commit
  files.commit(out, 4, std::nullopt);

  EXPECT_EQ(read(dir / "summary.json"), summary_json(sc, out, 4).dump(2) + "\n");
  EXPECT_EQ(read(dir / "resolved/scenario.toml"), read(sc.source_file));
  EXPECT_EQ(read(dir / "resolved/run.json"), resolved_run_json(sc, 4).dump(2) + "\n");
  EXPECT_TRUE(fs::exists(dir / "resolved" / fs::path(sc.model_path).filename()));
  std::ostringstream steps;
  write_step_trace(steps, sc, out, 4);
  EXPECT_EQ(read(record), steps.str());

  // The same run keeping its records: the streamed CSV is the kept records' CSV.
  RunOptions kept = testing::keeping_requests();
  const RunOutput again = run_scenario(sc, kept, 4);
  EXPECT_EQ(again.digest, out.digest);
  std::ostringstream requests;
  write_requests_csv(requests, again);
  EXPECT_EQ(read(dir / "requests.csv"), requests.str());
}

TEST(RunFiles, WritesTheGivenScenarioTextAndLocksTheDirectory) {
  const Scenario& sc = testing::test_scenario("tiny_agent");
  const fs::path dir = scratch::path("locked");
  fs::remove_all(dir);
  RunOptions opt;
  RunFiles files(sc, dir.string(), std::nullopt, opt);
  RunOptions second;
  EXPECT_THROW(RunFiles(sc, dir.string(), std::nullopt, second), ConfigError);
  const RunOutput out = run_scenario(sc, opt, 1);
  files.commit(out, 1, std::string("name = \"edited\"\n"));
  EXPECT_EQ(read(dir / "resolved/scenario.toml"), "name = \"edited\"\n");
  EXPECT_FALSE(fs::exists(dir / "trace.json"));  // no trace asked for
}

TEST(RunFiles, ChecksTheRecordPathBeforeTheRun) {
  const Scenario& sc = testing::test_scenario("tiny_agent");
  RunOptions opt;
  EXPECT_THROW(RunFiles(sc, std::nullopt, scratch::path("no/such/dir/steps.jsonl"), opt),
               ConfigError);
}

}  // namespace
}  // namespace moesim::sim::output
