// Replay of the tiny trace on the CPU: the measurement file is well formed, has exactly the
// expected records, and FLOP counts are exact.
#include "engine/replay.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/backend.h"
#include "engine/input_error.h"
#include "engine/step_trace.h"

namespace moesim::engine {
namespace {

using nlohmann::json;

const std::string kTracePath =
    std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_steps.jsonl";

std::vector<json> replay_records(const ReplayOptions& options) {
  const StepTrace trace = read_step_trace(kTracePath);
  std::unique_ptr<Backend> backend = make_backend("cpu");
  std::ostringstream out;
  MeasurementWriter writer(out);
  replay_trace(*backend, trace, options, writer);
  std::vector<json> records;
  std::istringstream in(out.str());
  std::string line;
  while (std::getline(in, line)) records.push_back(json::parse(line));
  return records;
}

// The op record for (step, gpu, layer, op), which must be unique.
const json& find_op(const std::vector<json>& records, int step, int gpu, int layer,
                    const std::string& op) {
  const json* found = nullptr;
  for (const json& r : records) {
    if (r["record"] == "op" && r["step"] == step && r["sim_gpu"] == gpu && r["layer"] == layer &&
        r["op"] == op) {
      EXPECT_EQ(found, nullptr) << "duplicate " << op;
      found = &r;
    }
  }
  EXPECT_NE(found, nullptr) << "missing " << op << " step " << step << " gpu " << gpu;
  static const json kNull;
  return found ? *found : kNull;
}

TEST(Replay, TinyTraceProducesTheExpectedRecords) {
  ReplayOptions options;
  options.warmup = 0;
  options.repeats = 1;
  options.engine_version = "test";
  const std::vector<json> records = replay_records(options);
  ASSERT_FALSE(records.empty());
  const json& header = records[0];
  EXPECT_EQ(header["record"], "header");
  EXPECT_EQ(header["schema"], "moesim.measurements.v1");
  EXPECT_EQ(header["backend"], "cpu");
  EXPECT_EQ(header["model"], "tiny");
  EXPECT_EQ(header["sim_gpus"], json::array({0, 1}));
  EXPECT_EQ(header["layers_run"].size(), 3u);
  EXPECT_TRUE(header["peaks"]["bf16_flops_per_s"].is_null());

  // Op kinds per (step, gpu), counted by hand from the trace (see docs/engine.md).
  std::map<std::string, int> kinds;
  int ops = 0, steps = 0, not_measured = 0;
  for (size_t i = 1; i < records.size(); ++i) {
    const json& r = records[i];
    if (r["record"] == "step") {
      ++steps;
      continue;
    }
    ASSERT_EQ(r["record"], "op");
    ++ops;
    ++kinds[r["op"].get<std::string>()];
    if (r["measured"] == false) {
      ++not_measured;
      EXPECT_TRUE(r["measured_ns"].is_null());
      EXPECT_TRUE(r["op"] == "dispatch_a2a" || r["op"] == "combine_a2a");
    } else {
      EXPECT_GE(r["measured_ns"].get<int64_t>(), 0);
    }
    EXPECT_EQ(r["backend"], "cpu");
    EXPECT_EQ(r["device"], header["device"]);
  }
  EXPECT_EQ(steps, 4);
  EXPECT_EQ(ops, 99);
  EXPECT_EQ(not_measured, 16);
  const std::map<std::string, int> expected = {
      {"rmsnorm", 12},         {"attn_mla_prefill", 3}, {"attn_mla_decode", 2},
      {"dense_ffn", 4},        {"attn_kda_prefill", 3}, {"attn_kda_decode", 2},
      {"attn_gqa_prefill", 3}, {"attn_gqa_decode", 2},  {"router", 8},
      {"permute", 8},          {"dispatch_a2a", 8},     {"expert_ffn", 8},
      {"shared_expert", 8},    {"combine_a2a", 8},      {"unpermute", 8},
      {"combine", 8},          {"lm_head", 4}};
  EXPECT_EQ(kinds, expected);

  // Exact FLOPs (2 per multiply-accumulate).
  EXPECT_EQ(find_op(records, 0, 0, 0, "dense_ffn")["flops"], 6.0 * 6 * 256 * 512);
  EXPECT_EQ(find_op(records, 0, 0, 1, "router")["flops"], 2.0 * 6 * 256 * 16);
  const json& experts = find_op(records, 0, 0, 1, "expert_ffn");
  EXPECT_EQ(experts["tokens"], 7);
  EXPECT_EQ(experts["experts"], json::array({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(experts["tokens_per_expert"], json::array({3, 2, 0, 2, 0, 0, 0, 0}));
  EXPECT_EQ(experts["flops"], 6.0 * 7 * 256 * 128);
  // Only the 3 experts with tokens are read: 3 x 3 x 256 x 128 BF16 weights.
  EXPECT_EQ(experts["weight_bytes"], 3.0 * 3 * 256 * 128 * 2);
  // MLA prefill of 6 tokens, no context (naive): q_a + q_b, kv_a, o, cache up-projection,
  // attention over 21 causal pairs.
  const double mla = 2.0 * 6 * (256 * 64 + 64 * 8 * 48) + 2.0 * 6 * 256 * 80 +
                     2.0 * 6 * 8 * 32 * 256 + 2.0 * 6 * 64 * 8 * 64 + 2.0 * 21 * 8 * 80;
  EXPECT_EQ(find_op(records, 0, 0, 0, "attn_mla_prefill")["flops"], mla);
  // MLA decode on GPU 1 at step 1 (context 4, absorbed): 1 token, 5 pairs.
  const double mla_decode = 2.0 * (256 * 64 + 64 * 8 * 48) + 2.0 * 256 * 80 + 2.0 * 8 * 32 * 256 +
                            2.0 * 8 * 32 * 64 + 2.0 * 8 * 64 * 32 + 2.0 * 5 * 8 * (2 * 64 + 16);
  const json& dec = find_op(records, 1, 1, 0, "attn_mla_decode");
  EXPECT_EQ(dec["flops"], mla_decode);
  EXPECT_EQ(dec["context_tokens_sum"], 4);
  EXPECT_EQ(dec["num_sequences"], 1);
  // GQA decode of 1 token after 6: projections and 7 pairs.
  EXPECT_EQ(find_op(records, 1, 0, 2, "attn_gqa_decode")["flops"],
            2.0 * 256 * 32 * (16 + 4) + 4.0 * 7 * 8 * 32);
  // KDA prefill of 4 tokens on GPU 1 at step 0.
  const double kda_gemm =
      256.0 * 8 * 96 + 256 * 32 + 32 * 256 + 256 * 8 + 8 * 32 * 256 + 256 * 32 + 32 * 256;
  EXPECT_EQ(find_op(records, 0, 1, 1, "attn_kda_prefill")["flops"],
            2 * 4 * kda_gemm + 2.0 * 4 * 4 * 768 + 6.0 * 4 * 8 * 32 * 32);
  // The output head once per (step, GPU) after the last layer (layer -1, scale 1), one row per
  // sequence, over the whole vocabulary (DP attention): GPU 1 holds 2 sequences at step 1.
  const json& head = find_op(records, 1, 1, -1, "lm_head");
  EXPECT_EQ(head["tokens"], 2);
  EXPECT_EQ(head["layer_scale"], 1);
  EXPECT_EQ(head["flops"], 2.0 * 2 * 256 * 32000);
  EXPECT_EQ(head["weight_bytes"], 256.0 * 32000 * 2);
  EXPECT_EQ(head["activation_bytes"], 2.0 * 256 * 2 + 2 * 8);
  EXPECT_EQ(head["measured"], true);
  // The dispatch all-to-all of GPU 0 in layer 1, step 0: 7 rows to GPU 1, 2 rows received, FP8.
  const json& a2a = find_op(records, 0, 0, 1, "dispatch_a2a");
  EXPECT_EQ(a2a["measured"], false);
  EXPECT_EQ(a2a["bytes"], (7.0 + 2.0) * 256);
  EXPECT_EQ(a2a["dtype"], "fp8");
}

TEST(Replay, SampleProfileAndGpuChoiceAreRecorded) {
  ReplayOptions options;
  options.warmup = 0;
  options.repeats = 1;
  options.layers = "every:2";
  options.gpus = {1};
  options.max_steps = 1;
  const std::vector<json> records = replay_records(options);
  EXPECT_EQ(records[0]["layers_run"],
            json::parse(R"([{"layer": 0, "scale": 2}, {"layer": 2, "scale": 1}])"));
  EXPECT_EQ(records[0]["sim_gpus"], json::array({1}));
  int steps = 0;
  for (const json& r : records) {
    if (r["record"] == "op") {
      EXPECT_EQ(r["sim_gpu"], 1);
      EXPECT_NE(r["layer"], 1);
      EXPECT_EQ(r["layer_scale"], r["layer"] == 0 ? 2 : 1);
    }
    if (r["record"] == "step") {
      ++steps;
      EXPECT_GE(r["scaled_ns_sum"].get<int64_t>(), r["measured_ns_sum"].get<int64_t>());
    }
  }
  EXPECT_EQ(steps, 1);
}

TEST(Replay, RefusesWhenTheGpuDoesNotFitTheMemoryLimit) {
  const StepTrace trace = read_step_trace(kTracePath);
  BackendOptions small;
  small.memory_limit_bytes = 64 * 1024;
  std::unique_ptr<Backend> backend = make_backend("cpu", small);
  std::ostringstream out;
  MeasurementWriter writer(out);
  try {
    replay_trace(*backend, trace, ReplayOptions{}, writer);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.available_bytes(), 64 * 1024);
    EXPECT_GT(e.requested_bytes(), 64 * 1024);
    EXPECT_NE(std::string(e.what()).find("the replay of simulated GPU 0 (weights "),
              std::string::npos)
        << e.what();
  }
}

TEST(Replay, RefusesAProfileTheModelDoesNotHave) {
  ReplayOptions options;
  options.layers = "0,7";
  try {
    replay_records(options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--layers 0,7: layer 7 does not exist (model 'tiny' has 3 layers)");
  }
  options.layers = "all";
  options.gpus = {2};
  try {
    replay_records(options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--gpus: GPU 2 is not in the trace's topology (2 GPUs)");
  }
}

}  // namespace
}  // namespace moesim::engine
