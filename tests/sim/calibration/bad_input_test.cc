// The bad-input corpus of the calibration readers: every file under tests/data/bad/calibration/
// must raise a ConfigError with exactly the message listed here ({dir} stands for the corpus
// directory), and every file must be listed, so a new corpus file cannot go unchecked. Most are
// minimised fuzz findings (issue 19, tests/fuzz/): numbers outside their type, steps out of
// order, a routing cell missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/recorded_routing.h"
#include "sim/calibration/step_trace_reader.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

const std::string kDir = MOESIM_SOURCE_DIR "/tests/data/bad/calibration";

const std::map<std::string, std::string>& expected_messages() {
  static const std::map<std::string, std::string> kMessages = {
      // Step traces.
      {"trace_context_tokens_int64_max.jsonl",
       "{dir}/trace_context_tokens_int64_max.jsonl:2: sequences.context_tokens: context_tokens + "
       "new_tokens must be <= 2147483647"},
      {"trace_count_above_int32.jsonl",
       "{dir}/trace_count_above_int32.jsonl:2: layers.routing: entries must be integers in "
       "int32's range"},
      {"trace_end_before_start.jsonl",
       "{dir}/trace_end_before_start.jsonl:2: end_ns: value 900 is out of range [1000, "
       "9223372036854775807]"},
      {"trace_end_ns_above_int64.jsonl",
       "{dir}/trace_end_ns_above_int64.jsonl:2: end_ns: integer out of range (int64)"},
      {"trace_gpu_above_int32.jsonl",
       "{dir}/trace_gpu_above_int32.jsonl:2: gpu: value 4294967296 is out of range "
       "[-2147483648, 2147483647]"},
      {"trace_missing_cell.jsonl",
       "{dir}/trace_missing_cell.jsonl: step 0.layers.routing: MoE layer 0: replica GPU 0 has 5 "
       "selections, its 3 tokens x top_k 2 make 6"},
      {"trace_model_not_object.jsonl",
       "{dir}/trace_model_not_object.jsonl:1: model: must be an object"},
      {"trace_scenario_not_string.jsonl",
       "{dir}/trace_scenario_not_string.jsonl:1: scenario: must be a string"},
      {"trace_steps_out_of_order.jsonl",
       "{dir}/trace_steps_out_of_order.jsonl:3: step: step 0 comes after step 1 of replica 0 "
       "(steps come in order)"},
      // Measurements.
      {"meas_measured_ns_above_int64.jsonl",
       "{dir}/meas_measured_ns_above_int64.jsonl:2: measured_ns: integer out of range (int64)"},
      {"meas_number_overflow.jsonl",
       "{dir}/meas_number_overflow.jsonl:2: malformed JSON: number overflow parsing '1e400'"},
      {"meas_sim_gpu_above_int32.jsonl",
       "{dir}/meas_sim_gpu_above_int32.jsonl:2: sim_gpu: integer out of range (int32)"},
  };
  return kMessages;
}

std::string with_dir(std::string message) {
  const std::string dir_token = "{dir}";
  for (size_t pos; (pos = message.find(dir_token)) != std::string::npos;) {
    message.replace(pos, dir_token.size(), kDir);
  }
  return message;
}

// Reads one corpus file the way `moesim validate` does: a step trace (the tiny model of
// tests/data/calibration: 4 experts, top-2, model layer 1 the MoE layer) is read, then every step
// of replica 0 is routed with its sequences' tokens per GPU; a measurement file is read.
std::string error_of(const std::filesystem::path& file) {
  return testing::config_error_of([&] {
    if (file.filename().string().rfind("meas_", 0) == 0) {
      read_measurements(file.string());
      return;
    }
    const StepTraceFile t = read_step_trace(file.string());
    RoutingShape shape;
    shape.num_moe_layers = 1;
    shape.num_experts = 4;
    shape.top_k = 2;
    RecordedRoutingModel routing(t, 0, shape, {-1, 0});
    const std::vector<int32_t>& gpus = t.replica_gpus.at(0);
    for (const TraceStep& s : t.steps) {
      std::vector<int32_t> tokens(gpus.size(), 0);
      for (const TraceSequence& q : s.sequences) {
        for (size_t i = 0; i < gpus.size(); ++i) {
          if (gpus[i] == q.gpu) tokens[i] += static_cast<int32_t>(q.new_tokens);
        }
      }
      RoutingQuery query;
      query.step_idx = s.step;
      query.moe_layer_idx = 0;
      query.tokens_per_src = tokens;
      CountMatrix out;
      routing.route(query, out);
    }
  });
}

TEST(CalibrationBadInput, EveryCorpusFileFailsWithItsExactMessage) {
  int num_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    ++num_files;
    const auto it = expected_messages().find(name);
    ASSERT_NE(it, expected_messages().end()) << "corpus file without an expected message";
    EXPECT_EQ(error_of(entry.path()), with_dir(it->second));
  }
  EXPECT_EQ(num_files, static_cast<int>(expected_messages().size()));
}

// The good traces of tests/data/calibration pass the same path: the corpus fails for its flaw.
TEST(CalibrationBadInput, TheGoodTraceRoutesCleanly) {
  EXPECT_EQ(error_of(MOESIM_SOURCE_DIR "/tests/data/calibration/trace_small.jsonl"), "");
}

}  // namespace
}  // namespace moesim::sim
