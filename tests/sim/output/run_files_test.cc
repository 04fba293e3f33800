// The files of one run (`moesim run --out DIR --record FILE`): what RunFiles streams during the
// run and commits after it equals what the writers give for a run that kept everything; the locks;
// a failed commit changes nothing; an earlier run's leftovers go.
#include "sim/output/run_files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
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

TEST(RunFiles, LocksTheRecordFile) {
  const Scenario& sc = testing::test_scenario("tiny_agent");
  const std::string record = scratch::path("locked.jsonl");
  RunOptions opt;
  RunFiles files(sc, std::nullopt, record, opt);
  RunOptions second;
  try {
    RunFiles again(sc, std::nullopt, record, second);
    FAIL() << "two runs on one --record file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "--record");
    EXPECT_NE(e.reason().find("in use by another moesim run"), std::string::npos) << e.what();
  }
}

std::set<std::string> hidden_files(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name[0] == '.' && name != ".moesim.lock") names.insert(name);
  }
  return names;
}

// Nothing is renamed into place before every file is complete: a write that fails (a file size
// limit standing for a full disk) leaves the earlier run's directory whole, and names the file
// that failed first (steps.csv, past the limit while the run went), not the first one renamed.
TEST(RunFiles, AFailedCommitLeavesTheEarlierRunWhole) {
  const Scenario& sc = testing::test_scenario("tiny_agent");
  const fs::path dir = scratch::path("whole");
  fs::remove_all(dir);
  {
    RunOptions opt;
    opt.chrome_trace = true;
    RunFiles files(sc, dir.string(), std::nullopt, opt);
    files.commit(run_scenario(sc, opt, 4), 4, std::nullopt);
  }
  const std::string summary = read(dir / "summary.json");
  const std::string steps = read(dir / "steps.csv");
  ASSERT_GT(steps.size(), 64u << 10);  // past the limit below, and past the write buffer

  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 16 << 10;
  std::string message;
  try {
    RunOptions opt;
    opt.chrome_trace = true;
    RunFiles files(sc, dir.string(), std::nullopt, opt);  // removes its temporaries when gone
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    files.commit(run_scenario(sc, opt, 5), 5, std::nullopt);
  } catch (const io::OutputError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, "cannot write " + (dir / "steps.csv").string() + ": " + std::strerror(EFBIG));
  EXPECT_EQ(read(dir / "summary.json"), summary);
  EXPECT_EQ(read(dir / "steps.csv"), steps);
  EXPECT_EQ(hidden_files(dir), std::set<std::string>{});
}

// summary.json describes the files beside it: an earlier run's outputs that this run does not
// write are removed.
TEST(RunFiles, RemovesOutputsOfAnEarlierRunThatThisRunDoesNotWrite) {
  const Scenario& sc = testing::test_scenario("tiny_agent");
  const fs::path dir = scratch::path("stale");
  fs::remove_all(dir);
  {
    RunOptions opt;
    opt.chrome_trace = true;
    RunFiles files(sc, dir.string(), std::nullopt, opt);
    files.commit(run_scenario(sc, opt, 4), 4, std::nullopt);
  }
  ASSERT_TRUE(fs::exists(dir / "trace.json"));
  std::ofstream(dir / ".trace.json.tmp.999999.0") << "left by a killed run";
  RunOptions opt;
  RunFiles files(sc, dir.string(), std::nullopt, opt);
  EXPECT_EQ(hidden_files(dir).size(), 2u);  // this run's requests.csv and steps.csv
  files.commit(run_scenario(sc, opt, 4), 4, std::nullopt);
  EXPECT_FALSE(fs::exists(dir / "trace.json"));
  EXPECT_TRUE(fs::exists(dir / "summary.json"));
  EXPECT_EQ(hidden_files(dir), std::set<std::string>{});
}

}  // namespace
}  // namespace moesim::sim::output
