#include "sim/api/serving_runs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/config_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::api {
namespace {

namespace fs = std::filesystem;
using sim::testing::config_error_of;

constexpr const char* kHeader =
    "request_id,session_id,turn_idx,attempt_idx,replica,domain,outcome,reject_reason,arrival_ns,"
    "first_scheduled_ns,first_token_ns,done_ns,prompt_tokens,output_tokens,generated_tokens,"
    "cached_prompt_tokens,preemptions,queueing_ms,ttft_ms,tpot_ms,e2e_ms,loaded_prompt_tokens,"
    "kv_load_ms,prefill_ms\n";
// Two completed requests and one rejected, as the simulator writes them.
constexpr const char* kRows =
    "0,0,0,0,0,chat,completed,,0,1000000,3000000,12000000,100,4,4,0,1,1.000000,3.000000,"
    "3.000000,12.000000,0,0.000000,2.000000\n"
    "1,1,0,0,0,\"chat, long\",completed,,500000000,500000000,502000000,503000000,100,1,1,0,0,"
    "0.000000,2.000000,,3.000000,0,0.000000,2.000000\n"
    "2,2,0,0,-1,chat,rejected,context_too_long,600000000,-1,-1,-1,900000,4,0,0,0,,,,,0,,\n";

std::string summary(const std::string& trace, int arrived, int completed, int rejected) {
  return std::string(R"({"schema": "moesim.serve_summary.v1", "trace": ")") + trace +
         R"(", "scenario": "tiny", "wall_s": 1.5, "steps": 9, "requests": {"arrived": )" +
         std::to_string(arrived) + ", \"completed\": " + std::to_string(completed) +
         ", \"rejected\": " + std::to_string(rejected) + ", \"in_flight\": 0}}";
}

std::string run_dir(const std::string& name, const std::string& summary_text,
                    const std::string& csv_text) {
  const std::string dir = scratch::path(name);
  fs::create_directories(dir);
  std::ofstream(dir + "/summary.json") << summary_text;
  std::ofstream(dir + "/requests.csv") << csv_text;
  return dir;
}

TEST(ServingRuns, ReadsTheRowsAndTheSummary) {
  const std::string dir =
      run_dir("a", summary("rate1.jsonl", 3, 2, 1), std::string(kHeader) + kRows);
  const ServingRun run = read_serving_run(dir);
  EXPECT_EQ(run.trace, "rate1.jsonl");
  EXPECT_EQ(run.scenario, "tiny");
  ASSERT_EQ(run.requests.size(), 3u);
  const ServedRequest& a = run.requests[0];
  EXPECT_EQ(a.outcome, ServedOutcome::kCompleted);
  EXPECT_EQ(a.done_ns, 12000000);
  EXPECT_EQ(a.generated_tokens, 4);
  EXPECT_EQ(a.preemptions, 1);
  EXPECT_DOUBLE_EQ(*a.ttft_ms, 3);
  EXPECT_DOUBLE_EQ(*a.queueing_ms, 1);
  EXPECT_FALSE(run.requests[1].tpot_ms.has_value());  // one token: empty TPOT cell
  EXPECT_EQ(run.requests[2].outcome, ServedOutcome::kRejected);
  EXPECT_FALSE(run.requests[2].ttft_ms.has_value());
}

TEST(ServingRuns, CountsMustMatchTheRows) {
  const std::string dir = run_dir("a", summary("t", 3, 3, 0), std::string(kHeader) + kRows);
  EXPECT_EQ(
      config_error_of([&] { read_serving_run(dir); }),
      dir + "/summary.json: requests.completed: 3, but " + dir + "/requests.csv has 2 such rows");
}

TEST(ServingRuns, StrictSummary) {
  const std::string csv = std::string(kHeader) + kRows;
  std::string dir = run_dir("schema", R"({"schema": "moesim.summary.v1"})", csv);
  EXPECT_NE(config_error_of([&] {
              read_serving_run(dir);
            }).find("summary.json: schema: 'moesim.summary.v1' is not a serve run's summary"),
            std::string::npos);
  dir = run_dir("no_requests",
                R"({"schema": "moesim.serve_summary.v1", "trace": "t", "scenario": "s"})", csv);
  EXPECT_EQ(config_error_of([&] { read_serving_run(dir); }),
            dir + "/summary.json: requests: missing");
  dir = run_dir("negative", summary("t", -3, 2, 1), csv);
  EXPECT_EQ(config_error_of([&] { read_serving_run(dir); }),
            dir + "/summary.json: requests.arrived: must be an integer >= 0");
  EXPECT_NE(
      config_error_of([&] { read_serving_run(scratch::path("absent")); }).find("summary.json"),
      std::string::npos);
}

TEST(ServingRuns, StrictRequestsCsv) {
  const std::string path = scratch::write("missing.csv", "request_id,outcome\n");
  EXPECT_EQ(config_error_of([&] { read_requests_csv(path); }),
            path + ":1: arrival_ns: missing column (docs/outputs.md, requests.csv)");
  std::string rows = kRows;
  rows.replace(rows.find("12.000000"), 9, "12ms");
  const std::string bad = scratch::write("bad.csv", kHeader + rows);
  EXPECT_EQ(config_error_of([&] { read_requests_csv(bad); }),
            bad + ":2: e2e_ms: not a number: '12ms'");
  const std::string outcome = scratch::write(
      "outcome.csv",
      kHeader + std::string(kRows).replace(std::string(kRows).find("completed"), 9, "finished"));
  EXPECT_NE(config_error_of([&] { read_requests_csv(outcome); }).find(":2: outcome: unknown"),
            std::string::npos);
  const std::string short_row = scratch::write("short.csv", std::string(kHeader) + "0,1,2\n");
  EXPECT_EQ(config_error_of([&] { read_requests_csv(short_row); }),
            short_row + ":2: 3 cells, the header has 24");
}

TEST(ServingRuns, GroupsByTraceInTheOrderGiven) {
  auto run = [](const std::string& dir, const std::string& trace) {
    ServingRun r;
    r.dir = dir;
    r.trace = trace;
    return r;
  };
  const auto groups = group_by_trace({run("a", "t2"), run("b", "t1"), run("c", "t2")});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].size(), 2u);
  EXPECT_EQ(groups[0][1].dir, "c");
  EXPECT_EQ(groups[1][0].dir, "b");
}

}  // namespace
}  // namespace moesim::sim::api
