#include "sim/calibration/step_trace_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

std::string data(const std::string& name) {
  return std::string(MOESIM_SOURCE_DIR) + "/tests/data/calibration/" + name;
}

TEST(StepTraceReader, ReadsHeaderStepsAndRouting) {
  StepTraceFile t = read_step_trace(data("trace_small.jsonl"));
  EXPECT_EQ(t.scenario, "hand");
  EXPECT_EQ(t.model, "tiny");
  EXPECT_EQ(t.num_gpus, 2);
  ASSERT_EQ(t.replica_gpus.size(), 1u);
  EXPECT_EQ(t.replica_gpus[0], (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(t.expert_gpus.size(), 4u);
  EXPECT_EQ(t.expert_gpus[2], (std::vector<int32_t>{1}));

  ASSERT_EQ(t.steps.size(), 2u);
  const TraceStep& s = t.steps[0];
  EXPECT_EQ(s.step, 0);
  EXPECT_EQ(s.replica, 0);
  EXPECT_EQ(s.start_ns, 1000);
  EXPECT_EQ(s.end_ns, 91000);
  ASSERT_EQ(s.sequences.size(), 3u);
  EXPECT_EQ(s.sequences[0].request, 7);
  EXPECT_TRUE(s.sequences[0].prefill);
  EXPECT_EQ(s.sequences[0].new_tokens, 2);
  EXPECT_EQ(s.sequences[0].context_tokens, 0);
  EXPECT_FALSE(s.sequences[2].prefill);
  EXPECT_EQ(s.sequences[2].gpu, 1);
  EXPECT_EQ(s.sequences[2].context_tokens, 12);
  ASSERT_EQ(s.layers.size(), 1u);
  EXPECT_EQ(s.layers[0].layer_idx, 1);
  EXPECT_DOUBLE_EQ(s.layers[0].dispatch_bytes, 2048);
  ASSERT_EQ(s.layers[0].routing.size(), 5u);
  EXPECT_EQ(s.layers[0].routing[1], (std::array<int64_t, 4>{0, 2, 1, 2}));
  EXPECT_EQ(t.steps[1].sequences.size(), 1u);
}

TEST(StepTraceReader, ReadsPlacementChanges) {
  StepTraceFile t = read_step_trace(data("trace_placement.jsonl"));
  ASSERT_EQ(t.steps.size(), 2u);
  ASSERT_EQ(t.placement_changes.size(), 1u);
  const TracePlacementChange& c = t.placement_changes[0];
  EXPECT_EQ(c.replica, 0);
  EXPECT_EQ(c.step, 1);
  ASSERT_EQ(c.expert_gpus.size(), 4u);
  EXPECT_EQ(c.expert_gpus[1], (std::vector<int32_t>{0, 1}));
}

void expect_error(const std::string& file, int line, const std::string& key) {
  try {
    read_step_trace(data(file));
    FAIL() << file << ": expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.key_path(), key) << e.what();
  }
}

TEST(StepTraceReader, RejectsMalformedRecords) {
  expect_error("trace_bad_count.jsonl", 2, "layers.routing");
  expect_error("trace_bad_phase.jsonl", 2, "sequences.phase");
  expect_error("trace_bad_replica.jsonl", 2, "replica");
  // Placement records: expert count differs from the header's, a GPU out of range, a record
  // for a step its replica has already passed.
  expect_error("trace_bad_placement.jsonl", 2, "expert_gpus");
  expect_error("trace_placement_bad_gpu.jsonl", 2, "expert_gpus");
  expect_error("trace_placement_late.jsonl", 3, "step");
  // A measurement file is not a step trace.
  expect_error("meas_small.jsonl", 1, "schema");
  EXPECT_THROW(read_step_trace(data("no_such_file.jsonl")), ConfigError);
}

}  // namespace
}  // namespace moesim::sim
