// Step-trace reader: the hand-written tiny trace parses into the expected structs; malformed
// traces are refused with FILE:LINE: FIELD: reason.
#include "engine/step_trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/input_error.h"
#include "engine/tensor.h"

namespace moesim::engine {
namespace {

const std::string kTracePath =
    std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_steps.jsonl";

std::string trace_text() {
  std::ifstream in(kTracePath);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The trace text with the first occurrence of `from` replaced by `to` (which must exist).
std::string with(const std::string& from, const std::string& to) {
  std::string text = trace_text();
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return pos == std::string::npos ? text : text.replace(pos, from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    parse_step_trace(text, "bad.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(StepTrace, ReadsTheTinyTrace) {
  const StepTrace t = read_step_trace(kTracePath);
  EXPECT_EQ(t.model.name, "tiny");
  EXPECT_EQ(t.model.hidden_size, 256);
  ASSERT_EQ(t.model.layers.size(), 3u);
  EXPECT_EQ(t.model.layers[0].attention_kind, AttentionKind::kMla);
  EXPECT_EQ(t.model.layers[0].mla.kv_lora_rank, 64);
  EXPECT_EQ(t.model.layers[0].mla.hidden_size, 256);
  EXPECT_FALSE(t.model.layers[0].is_moe);
  EXPECT_EQ(t.model.layers[0].intermediate_size, 512);
  EXPECT_EQ(t.model.layers[1].attention_kind, AttentionKind::kKda);
  EXPECT_EQ(t.model.layers[1].kda.short_conv_kernel, 4);  // default
  EXPECT_EQ(t.model.layers[1].kda.gate_lora_rank, 32);    // default: head_dim_k
  EXPECT_TRUE(t.model.layers[1].is_moe);
  EXPECT_EQ(t.model.layers[1].num_routed_experts, 16);
  EXPECT_EQ(t.model.layers[1].top_k, 2);
  EXPECT_EQ(t.model.layers[2].attention_kind, AttentionKind::kGqa);
  EXPECT_EQ(t.model.layers[2].gqa.num_kv_heads, 2);
  EXPECT_EQ(t.model.dtypes.dispatch, "fp8");
  EXPECT_EQ(t.topology.num_gpus, 2);
  ASSERT_EQ(t.placements.size(), 1u);
  EXPECT_EQ(t.placements[0].expert_gpus[9], std::vector<int32_t>{1});
  ASSERT_EQ(t.steps.size(), 2u);
  const TraceStep& s1 = t.steps[1];
  EXPECT_EQ(s1.line, 3);
  EXPECT_EQ(s1.step_idx, 1);
  ASSERT_EQ(s1.sequences.size(), 3u);
  EXPECT_EQ(s1.sequences[2].phase, Phase::kPrefill);
  EXPECT_EQ(s1.sequences[2].context_tokens, 5);
  EXPECT_EQ(s1.tokens_on_gpu(1), 4);
  ASSERT_EQ(s1.moe_layers.size(), 2u);
  EXPECT_EQ(s1.moe_layer(2)->routing.size(), 5u);
  EXPECT_EQ(s1.moe_layer(1)->dispatch_bytes, 1536);
  EXPECT_EQ(s1.sim_step_ns, 1000000);
}

TEST(StepTrace, MissingFileIsAnInputError) {
  EXPECT_THROW(read_step_trace("/nonexistent/steps.jsonl"), InputError);
}

TEST(StepTrace, RejectsInvalidJson) {
  EXPECT_EQ(
      error_of(with("\"record\": \"step\", \"step\": 1", "\"record\": \"step\", \"step\": 1,,"))
          .substr(0, 36),
      "bad.jsonl:3: record: invalid JSON: [");
}

TEST(StepTrace, RejectsModelDimensionsBeyondTheirBounds) {
  // Sizes whose products (buffers, weights) would pass int64 bytes are refused by the reader.
  EXPECT_EQ(error_of(with("\"hidden_size\": 256", "\"hidden_size\": 9000000000000000000")),
            "bad.jsonl:1: model.hidden_size: must be <= 131072, got 9000000000000000000");
  EXPECT_EQ(error_of(with("\"num_routed_experts\": 16", "\"num_routed_experts\": 100000")),
            "bad.jsonl:1: model.layers[1].ffn.num_routed_experts: must be <= 16384, got 100000");
  EXPECT_EQ(error_of(with("\"vocab_size\": 32000", "\"vocab_size\": 10000000")),
            "bad.jsonl:1: model.vocab_size: must be <= 4194304, got 10000000");
}

TEST(StepTrace, IntegersBeyondInt64AreRefusedAsWritten) {
  // Unsigned JSON integers above INT64_MAX are out of range, not wrapped to negative values.
  EXPECT_EQ(error_of(with("\"seed\": 1", "\"seed\": 18446744073709551615")),
            "bad.jsonl:1: seed: integer out of range, got 18446744073709551615");
  EXPECT_EQ(error_of(with("\"hidden_size\": 256", "\"hidden_size\": 9223372036854775808")),
            "bad.jsonl:1: model.hidden_size: integer out of range, got 9223372036854775808");
  EXPECT_EQ(error_of(with("\"hidden_size\": 256", "\"hidden_size\": 256.5")),
            "bad.jsonl:1: model.hidden_size: expected an integer, got 256.5");
}

TEST(StepTrace, ShapeSizesSaturateInsteadOfWrapping) {
  EXPECT_EQ(shape_num_elements({int64_t{1} << 40, int64_t{1} << 40}),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(shape_size_bytes({int64_t{1} << 31, int64_t{1} << 31}, 4),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(shape_size_bytes({3, 5}, 2), 30);
}

TEST(StepTrace, NumberBeyondADoubleIsAnInputError) {
  // Found by engine_step_trace_fuzz: nlohmann's out_of_range.406 escaped the reader.
  EXPECT_EQ(error_of(with("\"seed\": 1", "\"seed\": 7E777")),
            "bad.jsonl:1: record: invalid JSON: [json.exception.out_of_range.406] number overflow "
            "parsing '7E777'");
}

TEST(StepTrace, FuzzFindingsUnderTestsDataBadEngine) {
  const std::string path =
      std::string(MOESIM_SOURCE_DIR) + "/tests/data/bad/engine/number_overflow.jsonl";
  try {
    read_step_trace(path);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path +
                  ":1: record: invalid JSON: [json.exception.out_of_range.406] number overflow "
                  "parsing '7E777'");
  }
}

TEST(StepTrace, RejectsWrongSchema) {
  EXPECT_EQ(error_of(with("moesim.step_trace.v1", "moesim.step_trace.v0")),
            "bad.jsonl:1: schema: unsupported schema 'moesim.step_trace.v0' (expected "
            "moesim.step_trace.v1)");
}

// The simulator's overlap schedule: "none" when the header has none, read when it has one, and
// an unknown name is an error.
TEST(StepTrace, ReadsTheOverlapSchedule) {
  EXPECT_EQ(read_step_trace(kTracePath).overlap, "none");
  const StepTrace t = parse_step_trace(
      with("\"schema\": \"moesim.step_trace.v1\"",
           "\"schema\": \"moesim.step_trace.v1\", \"overlap\": \"decode_pipeline\""),
      "t.jsonl");
  EXPECT_EQ(t.overlap, "decode_pipeline");
  EXPECT_EQ(error_of(with("\"schema\": \"moesim.step_trace.v1\"",
                          "\"schema\": \"moesim.step_trace.v1\", \"overlap\": \"dual\"")),
            "bad.jsonl:1: overlap: unknown overlap 'dual' (valid: none, simple, two_microbatch, "
            "decode_pipeline)");
}

TEST(StepTrace, RejectsMissingField) {
  EXPECT_EQ(error_of(with("\"step\": 0, \"replica\": 0", "\"step\": 0")),
            "bad.jsonl:2: replica: missing");
}

TEST(StepTrace, RejectsUnknownAttentionKind) {
  EXPECT_EQ(error_of(with("\"kind\": \"kda\"", "\"kind\": \"mamba\"")),
            "bad.jsonl:1: model.layers[1].attention.kind: unknown attention kind 'mamba' "
            "(valid: mla, gqa, kda)");
}

TEST(StepTrace, RejectsExpertOutOfRange) {
  EXPECT_EQ(error_of(with("[0, 0, 0, 3]", "[0, 16, 0, 3]")),
            "bad.jsonl:2: layers[0].routing[0][1]: expert 16 out of range (16 routed experts)");
}

TEST(StepTrace, RejectsDestinationWithoutTheExpert) {
  EXPECT_EQ(error_of(with("[0, 0, 0, 3]", "[0, 0, 1, 3]")),
            "bad.jsonl:2: layers[0].routing[0][2]: GPU 1 holds no replica of expert 0 at step 0");
}

TEST(StepTrace, RejectsSelectionsThatDoNotSumToTopKTimesTokens) {
  EXPECT_EQ(error_of(with("[0, 0, 0, 3]", "[0, 0, 0, 2]")),
            "bad.jsonl:2: layers[0].routing: selections from GPU 0 sum to 11, expected top_k * "
            "tokens = 12");
}

TEST(StepTrace, RejectsAnExpertChosenMoreOftenThanTokens) {
  // GPU 1 has 4 tokens in step 0; 5 choices of expert 8 cannot come from distinct tokens.
  EXPECT_EQ(error_of(with("[1, 8, 1, 4], [1, 15, 1, 2]", "[1, 8, 1, 5], [1, 15, 1, 1]")),
            "bad.jsonl:2: layers[0].routing: expert 8 is chosen 5 times by GPU 1, which has only "
            "4 tokens");
}

TEST(StepTrace, ReadsASpeculativeVerificationDecode) {
  // Speculative decoding verifies 1 + k tokens per decode sequence (docs/serving.md): step 1's
  // decode sequence on GPU 0 verifying 2 tokens, its routing carrying both.
  std::string text =
      with("\"phase\": \"decode\", \"new_tokens\": 1", "\"phase\": \"decode\", \"new_tokens\": 2");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"[0, 1, 0, 1], [0, 14, 1, 1]", "[0, 1, 0, 2], [0, 14, 1, 2]"},
           {"[0, 6, 0, 1], [0, 8, 1, 1]", "[0, 6, 0, 2], [0, 8, 1, 2]"}}) {
    const size_t pos = text.find(from);
    ASSERT_NE(pos, std::string::npos) << from;
    text.replace(pos, from.size(), to);
  }
  const StepTrace t = parse_step_trace(text, "spec.jsonl");
  const TraceStep& s1 = t.steps[1];
  EXPECT_EQ(s1.sequences[0].phase, Phase::kDecode);
  EXPECT_EQ(s1.sequences[0].new_tokens, 2);
  EXPECT_EQ(s1.tokens_on_gpu(0), 2);
}

TEST(StepTrace, RejectsAnEmptyDecode) {
  EXPECT_EQ(error_of(with("\"phase\": \"decode\", \"new_tokens\": 1",
                          "\"phase\": \"decode\", \"new_tokens\": 0")),
            "bad.jsonl:3: sequences[0].new_tokens: must be >= 1, got 0");
}

TEST(StepTrace, RejectsADuplicatedMoeLayer) {
  EXPECT_EQ(error_of(with("{\"layer\": 2, \"routing\": [[0, 2, 0, 6]",
                          "{\"layer\": 1, \"routing\": [[0, 2, 0, 6]")),
            "bad.jsonl:2: layers[1].layer: layer 1 listed twice");
}

// The trace text with each (from, to) replacement applied in order (each `from` must exist).
std::string with_all(const std::vector<std::pair<std::string, std::string>>& edits) {
  std::string text = trace_text();
  for (const auto& [from, to] : edits) {
    const size_t pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) text.replace(pos, from.size(), to);
  }
  return text;
}

// Model, topology and shape mismatches name the field and the mismatch.
TEST(StepTrace, RejectsShapesThatDoNotFitTogether) {
  EXPECT_EQ(error_of(with("\"num_heads\": 8, \"num_kv_heads\": 2",
                          "\"num_heads\": 8, \"num_kv_heads\": 3")),
            "bad.jsonl:1: model.layers[2].attention.num_kv_heads: must divide num_heads (8)");
  EXPECT_EQ(error_of(with("\"qk_rope_head_dim\": 16", "\"qk_rope_head_dim\": 15")),
            "bad.jsonl:1: model.layers[0].attention.qk_rope_head_dim: must be even");
  EXPECT_EQ(error_of(with("\"num_routed_experts\": 16, \"top_k\": 2",
                          "\"num_routed_experts\": 16, \"top_k\": 17")),
            "bad.jsonl:1: model.layers[1].ffn.top_k: exceeds num_routed_experts (16)");
  EXPECT_EQ(error_of(with("\"num_routed_experts\": 16, \"top_k\": 2",
                          "\"num_routed_experts\": 8, \"top_k\": 2")),
            "bad.jsonl:1: model.layers[2].ffn.num_routed_experts: differs between MoE layers (one "
            "placement covers all of them)");
}

TEST(StepTrace, RejectsAPlacementThatDoesNotFitTheModelOrTopology) {
  EXPECT_EQ(error_of(with("\"expert_gpus\": [[0], ", "\"expert_gpus\": [")),
            "bad.jsonl:1: placement.expert_gpus: has 15 entries, the model has 16 routed experts");
  EXPECT_EQ(error_of(with("\"expert_gpus\": [[0], ", "\"expert_gpus\": [[2], ")),
            "bad.jsonl:1: placement.expert_gpus[0][0]: GPU 2 out of range (topology has 2)");
  EXPECT_EQ(error_of(with("\"gpus\": [0, 1]", "\"gpus\": [0, 2]")),
            "bad.jsonl:1: replicas[0].gpus[1]: GPU 2 out of range");
}

TEST(StepTrace, RejectsRoutingToAGpuOutsideTheStepsReplica) {
  // Three GPUs, replica 0 = {0, 1}; expert 0 also on GPU 2, which tokens of replica 0 cannot
  // reach.
  EXPECT_EQ(error_of(with_all({{"\"num_gpus\": 2", "\"num_gpus\": 3"},
                               {"\"expert_gpus\": [[0], ", "\"expert_gpus\": [[0, 2], "},
                               {"[0, 0, 0, 3]", "[0, 0, 2, 3]"}})),
            "bad.jsonl:2: layers[0].routing[0][2]: GPU 2 is not a GPU of replica 0 (tokens move "
            "within a replica)");
}

TEST(StepTrace, RejectsATraceWithoutHeader) {
  EXPECT_EQ(error_of(""), "bad.jsonl:1: record: empty trace (no header)");
}

// A placement record for one MoE layer ("layer": 2 moves expert 2 to GPU 1 there) applies to
// that layer only; routing is checked against each layer's placement in force.
TEST(StepTrace, PerLayerPlacementRecordsApplyToTheirLayer) {
  const std::string layer2 =
      "{\"record\": \"placement\", \"replica\": 0, \"step\": 0, \"layer\": 2, "
      "\"num_slots_per_gpu\": 9, \"expert_gpus\": [[0], [0], [1], [0], [0], [0], [0], [0], [1], "
      "[1], [1], [1], [1], [1], [1], [1]]}\n";
  std::string text = trace_text();
  const size_t first_step = text.find("{\"record\": \"step\"");
  ASSERT_NE(first_step, std::string::npos);
  std::string moved = text;
  moved.insert(first_step, layer2);
  // Step 0 sends expert 2's layer-2 tokens to GPU 0: no longer a replica there.
  EXPECT_EQ(error_of(moved),
            "bad.jsonl:3: layers[1].routing[0][2]: GPU 0 holds no replica of expert 2 at step 0");
  // Sent to GPU 1 instead (both steps), the trace reads; layer 1 keeps the header's placement.
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"[0, 2, 0, 6]", "[0, 2, 1, 6]"},
        {"[1, 2, 0, 3]", "[1, 2, 1, 3]"}}) {
    const size_t cell = moved.find(from);
    ASSERT_NE(cell, std::string::npos) << from;
    moved.replace(cell, from.size(), to);
  }
  const StepTrace t = parse_step_trace(moved, "moved.jsonl");
  ASSERT_EQ(t.placements.size(), 2u);
  EXPECT_EQ(t.placements[1].layer_idx, 2);
  EXPECT_EQ(t.placement_at(0, 0, 2).expert_gpus[2], std::vector<int32_t>{1});
  EXPECT_EQ(t.placement_at(0, 1, 2).expert_gpus[2], std::vector<int32_t>{1});
  EXPECT_EQ(t.placement_at(0, 0, 1).expert_gpus[2], std::vector<int32_t>{0});
  // A dense layer has no placement.
  std::string dense = text;
  std::string record = layer2;
  record.replace(record.find("\"layer\": 2"), 10, "\"layer\": 0");
  dense.insert(first_step, record);
  EXPECT_EQ(error_of(dense), "bad.jsonl:2: layer: layer 0 is not a MoE layer");
}

// Hostile values: a deeply nested one is refused by the JSON depth limit (dumping it overflowed
// the stack), a huge one is cut in the message.
TEST(StepTrace, DeepOrHugeValuesGiveShortErrors) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of("{\"record\": \"header\", \"schema\": " + deep + "}\n"),
            "bad.jsonl:1: record: invalid JSON: objects and arrays nested more than 64 deep");
  const std::string shallow = std::string(10, '[') + std::string(10, ']');
  EXPECT_EQ(error_of("{\"record\": \"header\", \"schema\": " + shallow + "}\n"),
            "bad.jsonl:1: schema: expected a string, got an array");
  const std::string huge =
      error_of("{\"record\": \"header\", \"schema\": \"" + std::string(300000, 'x') + "\"}\n");
  EXPECT_EQ(huge.rfind("bad.jsonl:1: schema: unsupported schema", 0), 0u) << huge.substr(0, 80);
  EXPECT_LT(huge.size(), 500u);
  EXPECT_NE(huge.find("... (cut)"), std::string::npos);
}

}  // namespace
}  // namespace moesim::engine
