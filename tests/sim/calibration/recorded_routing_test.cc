#include "sim/calibration/recorded_routing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

std::string data(const std::string& name) {
  return std::string(MOESIM_SOURCE_DIR) + "/tests/data/calibration/" + name;
}

// trace_small.jsonl: 2 GPUs, experts 0, 1 on GPU 0 and 2, 3 on GPU 1; layer 1 is the MoE layer.
RoutingShape shape(int32_t num_experts) {
  RoutingShape s;
  s.num_moe_layers = 1;
  s.num_experts = num_experts;
  s.top_k = 2;
  return s;
}

TEST(RecordedRoutingModel, ServesTheRecordedCounts) {
  StepTraceFile t = read_step_trace(data("trace_small.jsonl"));
  RecordedRoutingModel r(t, 0, shape(4), {-1, 0});
  std::vector<int32_t> tokens = {3, 1};
  RoutingQuery q;
  q.step_idx = 0;
  q.moe_layer_idx = 0;
  q.tokens_per_src = tokens;
  CountMatrix se;
  r.route(q, se);
  ASSERT_EQ(se.num_rows(), 2);
  ASSERT_EQ(se.num_cols(), 4);
  EXPECT_EQ(se.at(0, 0), 3);
  EXPECT_EQ(se.at(0, 1), 0);
  EXPECT_EQ(se.at(0, 2), 2);
  EXPECT_EQ(se.at(0, 3), 1);
  EXPECT_EQ(se.at(1, 1), 1);
  EXPECT_EQ(se.at(1, 3), 1);
  CountMatrix sd;
  std::vector<int32_t> ignored_gpu_of_expert = {1, 1, 0, 0};
  r.route_to_gpus(q, ignored_gpu_of_expert, 2, sd);
  EXPECT_EQ(sd.at(0, 0), 3);
  EXPECT_EQ(sd.at(0, 1), 3);
  EXPECT_EQ(sd.at(1, 0), 1);
  EXPECT_EQ(sd.at(1, 1), 1);

  // Step 1: GPU 1 has no tokens.
  std::vector<int32_t> tokens1 = {1, 0};
  q.step_idx = 1;
  q.tokens_per_src = tokens1;
  r.route_to_gpus(q, ignored_gpu_of_expert, 2, sd);
  EXPECT_EQ(sd.at(0, 0), 1);
  EXPECT_EQ(sd.at(0, 1), 1);
  EXPECT_EQ(sd.row_sum(1), 0);
}

TEST(RecordedRoutingModel, RejectsRoutingThatDoesNotFitTheModel) {
  StepTraceFile t = read_step_trace(data("trace_small.jsonl"));
  // Layer 1 is not an MoE layer of this model.
  EXPECT_THROW(RecordedRoutingModel(t, 0, shape(4), {-1, -1}), ConfigError);
  EXPECT_THROW(RecordedRoutingModel(t, 0, shape(4), {0}), ConfigError);
  // Experts 2 and 3 do not exist in a 2-expert model.
  EXPECT_THROW(RecordedRoutingModel(t, 0, shape(2), {-1, 0}), ConfigError);
  // A destination GPU of another replica.
  StepTraceFile bad = read_step_trace(data("trace_bad_gpu.jsonl"));
  EXPECT_THROW(RecordedRoutingModel(bad, 0, shape(4), {-1, 0}), ConfigError);
}

// A trace whose routing does not match the re-simulated batch (a routing cell missing, a layer
// missing) is bad input naming the trace, not an internal check (issue 19).
TEST(RecordedRoutingModel, QueryOffTheRecordedTokensIsBadInput) {
  const std::string file = data("trace_small.jsonl");
  StepTraceFile t = read_step_trace(file);
  RecordedRoutingModel r(t, 0, shape(4), {-1, 0});
  std::vector<int32_t> tokens = {2, 1};  // recorded: 3 and 1
  RoutingQuery q;
  q.step_idx = 0;
  q.tokens_per_src = tokens;
  CountMatrix out;
  EXPECT_EQ(testing::config_error_of([&] { r.route(q, out); }),
            file +
                ": step 0.layers.routing: MoE layer 0: replica GPU 0 has 6 selections, its 2 "
                "tokens x top_k 2 make 4");
  q.step_idx = 5;  // not recorded
  EXPECT_EQ(
      testing::config_error_of([&] { r.route(q, out); }),
      file + ": step 5.layers: no routing recorded for MoE layer 0 in a step that has tokens");
}

TEST(RecordedRoutingModel, MissingRoutingCellIsBadInput) {
  const std::string file = MOESIM_SOURCE_DIR "/tests/data/bad/calibration/trace_missing_cell.jsonl";
  StepTraceFile t = read_step_trace(file);
  RecordedRoutingModel r(t, 0, shape(4), {-1, 0});
  std::vector<int32_t> tokens = {3, 1};  // as recorded in the step's sequences
  RoutingQuery q;
  q.step_idx = 0;
  q.tokens_per_src = tokens;
  CountMatrix out;
  EXPECT_EQ(testing::config_error_of([&] { r.route(q, out); }),
            file +
                ": step 0.layers.routing: MoE layer 0: replica GPU 0 has 5 selections, its 3 "
                "tokens x top_k 2 make 6");
}

}  // namespace
}  // namespace moesim::sim
