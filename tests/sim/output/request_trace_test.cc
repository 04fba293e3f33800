// The request trace (`moesim run --export-requests`, docs/schemas/request_trace.md): the header's
// resolved values against the scenario file's, one record per arrival with the run's own values,
// the step trace's sections byte for byte, the unsupported policies, and the failures (an
// unwritable path is bad input; a failed write names the path and the errno text).
#include "sim/output/request_trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/output/run_files.h"
#include "sim/policy/policy_registry.h"
#include "tests/sim/serving/test_scenarios.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::output {
namespace {

using nlohmann::json;

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs `sc` with its policies, the trace exported to `path`; the run keeps its records.
RunOutput export_run(const Scenario& sc, const std::string& path, uint64_t seed) {
  RunOptions opt = testing::keeping_requests();
  RequestTraceWriter writer(path, sc);
  opt.arrival_sink = &writer;
  opt.expert_selections = true;
  RunOutput out = run_scenario(sc, opt, static_cast<int64_t>(seed), make_policies(sc));
  writer.prepare(out, seed)->publish();
  EXPECT_EQ(writer.num_records(), static_cast<int64_t>(out.requests.size()));
  return out;
}

TEST(RequestTrace, HeaderCarriesTheResolvedScenario) {
  const Scenario& sc = testing::test_scenario("tiny_request_trace");
  const std::string path = scratch::path("requests.jsonl");
  const RunOutput out = export_run(sc, path, 3);
  const std::vector<std::string> lines = lines_of(path);
  ASSERT_GE(lines.size(), 2u);
  const json h = json::parse(lines[0]);

  EXPECT_EQ(h["record"], "header");
  EXPECT_EQ(h["schema"], "moesim.request_trace.v1");
  EXPECT_EQ(h["scenario"], "tiny_request_trace");
  EXPECT_EQ(h["seed"], 3);
  // The values of tests/data/scenarios/tiny_request_trace.toml and models/tiny.toml.
  const json& s = h["scheduler"];
  EXPECT_EQ(s["max_seqs"], 48);
  EXPECT_EQ(s["max_batch_tokens_per_gpu"], 384);
  EXPECT_EQ(s["max_step_tokens"], -1);
  EXPECT_EQ(s["chunked_prefill"], true);
  EXPECT_EQ(s["kv_block_tokens"], 32);
  EXPECT_EQ(s["preemption"], "recompute");
  EXPECT_EQ(s["max_queued_requests"], 500);
  EXPECT_EQ(s["max_context_tokens"], 4096);
  EXPECT_EQ(s["prefix_caching"], true);
  EXPECT_EQ(s["prefix_block_tokens"], 512);
  // One rank's pool as the memory layout sized it: every GPU (one rank each) has the same.
  EXPECT_GT(s["kv_blocks_per_rank"].get<int64_t>(), 0);
  for (const GpuRecord& g : out.gpus) EXPECT_EQ(s["kv_blocks_per_rank"], g.num_kv_blocks);
  EXPECT_EQ(h["router"], "round_robin");
  EXPECT_EQ(h["pools"], json::parse(R"([{"name": "short", "replicas": [0]},
                                        {"name": "long", "replicas": [1]}])"));
  EXPECT_EQ(h["admission"], json::parse(R"({
      "concurrency_cap": {"max_seqs_per_replica": 16, "max_step_tokens_per_replica": -1},
      "queue_isolation": {"long_threshold_tokens": 512, "isolate": true,
                          "short_pool": "short", "long_pool": "long"},
      "long_context_cap": {"threshold_tokens": 1500, "action": "reject", "short_pool": "short"}})"));
  EXPECT_EQ(h["unsupported_policies"], json::array());
  EXPECT_EQ(h["slo"], json::parse(R"({"ttft_ms": 250.0, "tpot_ms": 20.0})"));
  EXPECT_EQ(h["duration_ns"], 10'000'000);
  // One row of shares per MoE layer, one share per routed expert, each row summing to 1.
  const json& shares = h["routing"]["expert_share"];
  int64_t num_moe = 0;
  for (const LayerSpec& l : sc.model->layers) num_moe += l.ffn.is_moe;
  ASSERT_EQ(static_cast<int64_t>(shares.size()), num_moe);
  for (const json& row : shares) {
    ASSERT_EQ(row.size(), 16u);
    double sum = 0;
    for (const json& v : row) {
      EXPECT_GE(v.get<double>(), 0.0);
      sum += v.get<double>();
    }
    EXPECT_NEAR(sum, 1.0, 1e-9);
  }

  // One record per arrival, in the order of requests.csv, rejected ones included.
  ASSERT_EQ(lines.size() - 1, out.requests.size());
  EXPECT_EQ(static_cast<int64_t>(out.requests.size()), out.summary.num_arrived);
  int64_t rejected = 0;
  for (size_t i = 0; i < out.requests.size(); ++i) {
    const RequestRecord& r = out.requests[i];
    const json j = json::parse(lines[i + 1]);
    SCOPED_TRACE(lines[i + 1]);
    EXPECT_EQ(j["record"], "request");
    EXPECT_EQ(j["request_id"], r.request_id);
    EXPECT_EQ(j["arrival_ns"], r.arrival_ns);
    EXPECT_EQ(j["prompt_tokens"], r.prompt_tokens);
    EXPECT_EQ(j["output_tokens"], r.output_tokens);
    EXPECT_EQ(j["session_id"], -1);
    EXPECT_EQ(j["turn_idx"], 0);
    EXPECT_EQ(j["domain"], "chat");
    // Prefix caching: one hash per 512-token block of the prompt.
    EXPECT_EQ(static_cast<int64_t>(j["prefix_blocks"].size()), (r.prompt_tokens + 511) / 512);
    rejected += r.outcome == RequestOutcome::kRejected;
  }
  EXPECT_GT(rejected, 0);  // prompts over the long-context cap's 1500 tokens
  EXPECT_EQ(rejected, out.summary.num_rejected);
}

// Both traces' headers come from one function: the sections the engine parses are the same bytes.
TEST(RequestTrace, HeaderSharesTheStepTraceSectionsByteForByte) {
  const Scenario& sc = testing::test_scenario("tiny_request_trace");
  const std::string record = scratch::path("steps_for_header.jsonl");
  const std::string requests = scratch::path("requests_for_header.jsonl");
  RunOptions opt;
  opt.record_steps = true;
  opt.record_max_steps = 5;
  RunFiles files(sc, std::nullopt, record, opt);
  files.export_requests(requests, opt);
  const RunOutput out = run_scenario(sc, opt, 3, make_policies(sc));
  files.commit(out, 3, std::nullopt);
  const std::string step_header = lines_of(record).at(0);
  json h = json::parse(lines_of(requests).at(0));
  for (const char* key : {"scheduler", "router", "pools", "admission", "unsupported_policies",
                          "routing", "slo", "duration_ns"}) {
    ASSERT_TRUE(h.contains(key)) << key;
    h.erase(key);
  }
  h["schema"] = "moesim.step_trace.v1";
  EXPECT_EQ(h.dump(), step_header);
}

TEST(RequestTrace, ListsThePoliciesTheEngineCannotExpress) {
  const Scenario& sc = testing::test_scenario("tiny_cpu_eplb");
  const std::string path = scratch::path("requests_eplb.jsonl");
  Scenario shorter = sc;
  shorter.run.duration_s = 0.002;
  export_run(shorter, path, 1);
  const json h = json::parse(lines_of(path).at(0));
  EXPECT_EQ(h["unsupported_policies"], json::array({"eplb"}));
  EXPECT_EQ(h["admission"], json::object());
  EXPECT_EQ(h["pools"], json::array());
}

TEST(RequestTrace, AnUnwritablePathIsBadInputBeforeTheRun) {
  const Scenario& sc = testing::test_scenario("tiny_request_trace");
  try {
    RequestTraceWriter writer(scratch::path("no/such/dir/requests.jsonl"), sc);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir/requests.jsonl: --export-requests:"),
              std::string::npos)
        << e.what();
  }
}

// A device is written in place (the spool goes to the temporary directory): a full one fails the
// write with the path and the errno text.
TEST(RequestTrace, AFailedWriteNamesThePathAndTheReason) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const Scenario& sc = testing::test_scenario("tiny_request_trace");
  RequestTraceWriter writer("/dev/full", sc);
  RunOptions opt;
  opt.arrival_sink = &writer;
  opt.expert_selections = true;
  const RunOutput out = run_scenario(sc, opt, 3, make_policies(sc));
  try {
    writer.prepare(out, 3);
    FAIL() << "no error";
  } catch (const io::OutputError& e) {
    EXPECT_STREQ(e.what(), "cannot write /dev/full: No space left on device");
  }
}

TEST(RequestTrace, ATraceForAnotherModelIsRefused) {
  const std::string trace = scratch::write(
      "other_model.jsonl",
      R"({"record": "header", "schema": "moesim.request_trace.v1", "model": {"name": "qwen"}})"
      "\n");
  const std::string scenario =
      scratch::write("replay_other_model.toml",
                     "name = \"replay\"\nmodel = \"" MOESIM_SOURCE_DIR
                     "/models/tiny.toml\"\ntopology = \"" MOESIM_SOURCE_DIR
                     "/topologies/cpu-2.toml\"\n[deployment]\nreplicas = 1\ngpus_per_replica = 2\n"
                     "[workload]\nkind = \"request_trace\"\npath = "
                     "\"other_model.jsonl\"\n[run]\nduration_s = 0.01\n");
  try {
    load_scenario(scenario);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              trace +
                  ":1: model.name: the trace was exported for model \"qwen\" but the "
                  "scenario's model is \"tiny\"");
  }
}

}  // namespace
}  // namespace moesim::sim::output
