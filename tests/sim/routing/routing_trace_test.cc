#include "sim/routing/routing_trace.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/routing/replay_routing.h"
#include "sim/routing/synthetic_routing.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

const RoutingShape kShape{3, 16, 2, 1, 1};

TEST(RoutingTrace, RecordThenReplayGivesTheSameCounts) {
  RoutingSpec spec;
  spec.defaults.popularity = PopularityKind::kZipf;
  spec.defaults.zipf_s = 1.5;
  SyntheticRoutingModel synth(kShape, spec, 3);
  std::ostringstream os;
  RoutingTraceWriter writer(os, {3, 16, 4, 2});
  RecordingRoutingModel recorder(synth, writer);
  // Few tokens give sparse records, many dense ones.
  const std::vector<std::vector<int32_t>> tokens = {{2, 0, 30, 100}, {1, 0, 0, 1}};
  std::vector<CountMatrix> expected;
  CountMatrix out;
  for (int64_t step = 0; step < 4; ++step) {
    for (int32_t l = 0; l < 3; ++l) {
      recorder.route({step, l, tokens[step % 2], {}}, out);
      expected.push_back(out);
    }
  }
  EXPECT_EQ(writer.num_records(), 12);
  EXPECT_NE(os.str().find("\"sparse\""), std::string::npos);
  EXPECT_NE(os.str().find("\"dense\""), std::string::npos);
  std::istringstream is(os.str());
  RoutingTrace trace = read_routing_trace(is, "mem.jsonl");
  EXPECT_EQ(trace.num_steps, 4);
  ReplayRoutingModel replay(std::move(trace), kShape, 4);
  for (int64_t step = 0; step < 8; ++step) {  // steps 4..7 wrap around
    for (int32_t l = 0; l < 3; ++l) {
      replay.route({step, l, tokens[step % 2], {}}, out);
      EXPECT_EQ(out, expected[(step % 4) * 3 + l]) << step << " " << l;
    }
  }
}

TEST(RoutingTrace, ReplayRescalesToOtherTokenCounts) {
  std::istringstream is(
      "{\"format\":\"moesim-routing-trace\",\"version\":1,\"num_moe_layers\":1,"
      "\"num_experts\":4,\"num_src_gpus\":2,\"top_k\":2}\n"
      "{\"step\":0,\"layer\":0,\"tokens\":[4,0],\"dense\":[[4,2,2,0],[0,0,0,0]]}\n");
  ReplayRoutingModel replay(read_routing_trace(is, "t.jsonl"), {1, 4, 2, 1, 1}, 2);
  const std::vector<int32_t> tokens = {2, 1};
  CountMatrix out;
  replay.route({0, 0, tokens, {}}, out);
  // Source 0: 4 selections in proportion 4:2:2:0 -> 2,1,1,0 (cap 2 per expert).
  EXPECT_EQ(out.at(0, 0), 2);
  EXPECT_EQ(out.at(0, 1), 1);
  EXPECT_EQ(out.at(0, 2), 1);
  // Source 1 recorded nothing: the layer's totals (4,2,2,0) with cap 1 -> 1,1 on experts 0..1
  // after capping expert 0, largest remainder among 1 and 2 by lower index.
  EXPECT_EQ(out.row_sum(1), 2);
  for (int32_t v : out.row(1)) EXPECT_LE(v, 1);
  EXPECT_EQ(out.at(1, 0), 1);
}

TEST(RoutingTrace, HeaderMismatchIsAConfigError) {
  std::istringstream is(
      "{\"format\":\"moesim-routing-trace\",\"version\":1,\"num_moe_layers\":1,"
      "\"num_experts\":4,\"num_src_gpus\":2,\"top_k\":2}\n"
      "{\"step\":0,\"layer\":0,\"tokens\":[0,0],\"sparse\":[]}\n");
  RoutingTrace trace = read_routing_trace(is, "t.jsonl");
  EXPECT_EQ(config_error_of([&] {
              ReplayRoutingModel(trace, {1, 8, 2, 1, 1}, 2);
            }),
            "t.jsonl:1: num_experts: trace has 4, the scenario needs 8");
}

struct BadTrace {
  const char* file;
  const char* expected;  // the error after "<path>:"
};

class BadTraceFiles : public ::testing::TestWithParam<BadTrace> {};

TEST_P(BadTraceFiles, ErrorNamesFileLineAndReason) {
  const std::string path =
      std::string(MOESIM_SOURCE_DIR) + "/tests/data/bad/routing/" + GetParam().file;
  const std::string e = config_error_of([&] { load_routing_trace(path); });
  EXPECT_EQ(e.rfind(path + ":", 0), 0u) << e;
  EXPECT_NE(e.find(GetParam().expected), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadTraceFiles,
    ::testing::Values(BadTrace{"row_sum.jsonl",
                               ":2: dense: source 1 has 5 selections, expected tokens * top_k = 4"},
                      BadTrace{"out_of_order.jsonl", ":3: step: expected step 1 layer 0"},
                      BadTrace{"malformed_json.jsonl", ":2: malformed JSON"},
                      BadTrace{"cell_above_tokens.jsonl",
                               ":2: sparse[0][2]: value 2 is out of range [1, 1]"}),
    [](const auto& info) { return "file" + std::to_string(info.index); });

}  // namespace
}  // namespace moesim::sim
