#include "sim/model/hf_config.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/model/model_card_parser.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

const std::string kSource = MOESIM_SOURCE_DIR;

std::string parse_error(const std::string& json) {
  return testing::config_error_of([&] { parse_hf_config(json, "config.json"); });
}

TEST(HfConfig, DeepSeekV3ImportEqualsTheTomlCard) {
  ModelCard from_json = load_model_card(kSource + "/models/deepseek-v3.config.json");
  const ModelCard from_toml = load_model_card(kSource + "/models/deepseek-v3.toml");
  EXPECT_EQ(from_json.name, "deepseek_v3");
  EXPECT_EQ(from_json.precision.routed_experts, DType::kFP8);  // quantization_config fp8
  EXPECT_EQ(from_json.precision.embeddings, DType::kBF16);
  // The checkpoint's MoEGate is not an nn.Linear and stays BF16, and its block scales are
  // counted; the TOML card stores the router with the shared experts and ignores the scales.
  EXPECT_EQ(from_json.precision.router, DType::kBF16);
  EXPECT_FALSE(from_toml.precision.router.has_value());
  EXPECT_EQ(from_json.precision.storage[static_cast<size_t>(TensorGroup::kAttention)].format,
            "fp8 e4m3, 128x128 blocks, fp32 scales");
  from_json.name = from_toml.name;
  from_json.source_file = from_toml.source_file;
  from_json.precision = from_toml.precision;
  EXPECT_TRUE(from_json == from_toml);
}

TEST(HfConfig, Qwen3MoeAndMixtral) {
  const ModelCard qwen = parse_hf_config(R"({
    "model_type": "qwen3_moe", "hidden_size": 4096, "num_hidden_layers": 94,
    "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
    "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
    "intermediate_size": 12288, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "norm_topk_prob": true, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": null, "use_sliding_window": false,
    "max_window_layers": 94, "output_router_logits": false, "router_aux_loss_coef": 0.001
  })",
                                         "qwen.json", "qwen3-235b-a22b");
  ModelCard qwen_toml = load_model_card(kSource + "/models/qwen3-235b-a22b.toml");
  qwen_toml.source_file = "qwen.json";
  EXPECT_TRUE(qwen == qwen_toml);

  const ModelCard mixtral = parse_hf_config(R"({
    "model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "num_experts_per_tok": 2, "intermediate_size": 14336, "vocab_size": 32000,
    "max_position_embeddings": 32768, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
  })",
                                            "mixtral.json", "mixtral-8x7b");
  ModelCard mixtral_toml = load_model_card(kSource + "/models/mixtral-8x7b.toml");
  mixtral_toml.source_file = "mixtral.json";
  EXPECT_TRUE(mixtral == mixtral_toml);
}

TEST(HfConfig, NullQueryLoraMeansNone) {
  const ModelCard lite = parse_hf_config(R"({
    "model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
    "num_attention_heads": 16, "q_lora_rank": null, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
    "moe_intermediate_size": 1408, "intermediate_size": 10944, "first_k_dense_replace": 1,
    "vocab_size": 102400, "max_position_embeddings": 163840
  })",
                                         "lite.json");
  EXPECT_EQ(lite.layers[0].attention.mla.q_lora_rank, 0);
  EXPECT_EQ(lite.layers[1].ffn.moe.num_shared_experts, 2);
  EXPECT_EQ(lite.layers[1].ffn.moe.scoring, ScoringFunc::kSoftmax);
  // DeepSeek-V2-Lite, published 15.7B total.
  EXPECT_NEAR(total_params(lite) / 15.7e9, 1.0, 0.01);
}

// A small valid Mixtral config with `extra` spliced in before the closing brace.
std::string mixtral_with(const std::string& extra) {
  return R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
    "intermediate_size": 32, "vocab_size": 10, "max_position_embeddings": 16)" +
         extra + "}";
}

std::string error_of(const std::string& extra) { return parse_error(mixtral_with(extra)); }

TEST(HfConfig, NumbersOutOfRangeAreRefusedNotConverted) {
  EXPECT_EQ(parse_error(R"({"model_type": "mixtral", "hidden_size": -64})"),
            "config.json:1:27: hidden_size: value -64 is out of range [1, 16777216]");
  EXPECT_EQ(parse_error(R"({"model_type": "mixtral", "hidden_size": 9223372036854775807})"),
            "config.json:1:27: hidden_size: value 9223372036854775807 is out of range [1, "
            "16777216]");
  EXPECT_EQ(parse_error(R"({"model_type": "mixtral", "hidden_size": 18446744073709551615})"),
            "config.json:1:27: hidden_size: value 18446744073709551615 is out of range [1, "
            "16777216]");
  EXPECT_EQ(parse_error(R"({"model_type": "mixtral", "hidden_size": 1e400})"),
            "config.json:1:42: number out of range '1e400' (beyond double precision)");
  EXPECT_EQ(parse_error(R"({"model_type": "mixtral", "hidden_size": 64.0})"),
            "config.json:1:27: hidden_size: expected an integer, got float");
  EXPECT_EQ(parse_error(R"({"model_type": "mixtral", "hidden_size": true})"),
            "config.json:1:27: hidden_size: expected an integer, got boolean");
  EXPECT_EQ(error_of(R"(, "quantization_config": {"quant_method": "awq", "bits": 4,
    "group_size": -128})"),
            "config.json:4:5: quantization_config.group_size: value -128 is out of range [1, "
            "1048576]");
  EXPECT_EQ(parse_error(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_experts": 4, "num_experts_per_tok": 2, "mlp_only_layers": [0],
    "moe_intermediate_size": 32, "intermediate_size": -1, "vocab_size": 10,
    "max_position_embeddings": 16})"),
            "config.json:3:34: intermediate_size: value -1 is out of range [1, 16777216]");
}

TEST(HfConfig, KeySpellingsOfTransformers4And5MustAgree) {
  EXPECT_EQ(error_of(R"(, "dtype": "bfloat16", "torch_dtype": "float16")"),
            "config.json:3:100: torch_dtype: disagrees with dtype ('bfloat16')");
  EXPECT_EQ(parse_hf_config(mixtral_with(R"(, "dtype": "float16")"), "c.json").precision.attention,
            DType::kFP16);
  const std::string qwen = R"({"model_type": "qwen3_moe", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "vocab_size": 10, "max_position_embeddings": 16, )";
  EXPECT_EQ(parse_hf_config(qwen + R"("num_local_experts": 8})", "q.json")
                .layers[0]
                .ffn.moe.num_routed_experts,
            8);
  EXPECT_EQ(parse_error(qwen + R"("num_experts": 8, "num_local_experts": 4})"),
            "config.json:3:101: num_local_experts: disagrees with 'num_experts' (8)");
  EXPECT_EQ(parse_error(qwen + "\"rope_parameters\": {}}"),
            "config.json: num_experts: missing required key (integer; or its alias "
            "'num_local_experts')");
}

TEST(HfConfig, Llama4TextConfigInsideTheMultimodalWrapper) {
  const std::string wrapper = R"({"model_type": "llama4", "vision_config": {"hidden_size": 8},
    "torch_dtype": "bfloat16", "text_config": {"model_type": "llama4_text", "hidden_size": 64,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 1, "intermediate_size": 32,
    "intermediate_size_mlp": 128, "interleave_moe_layer_step": 2, "vocab_size": 10,
    "max_position_embeddings": 16, "use_qk_norm": true)";
  const ModelCard c = parse_hf_config(wrapper + "}}", "l4.json");
  ASSERT_EQ(c.layers.size(), 4u);
  EXPECT_FALSE(c.layers[0].ffn.is_moe);
  EXPECT_EQ(c.layers[0].ffn.intermediate_size, 128);
  EXPECT_TRUE(c.layers[1].ffn.is_moe);
  EXPECT_EQ(c.layers[1].ffn.moe.num_shared_experts, 1);
  EXPECT_EQ(c.layers[1].ffn.moe.shared_intermediate_size, 32);
  EXPECT_FALSE(c.layers[1].attention.gqa.qk_norm);  // L2 norm without weights
  EXPECT_EQ(parse_error(wrapper + R"(, "moe_layers": [0, 2]}})"),
            "config.json:6:57: text_config.moe_layers: disagrees with interleave_moe_layer_step "
            "(2)");
  EXPECT_EQ(parse_error(wrapper + R"(, "hiden_size": 1}})"),
            "config.json:6:57: text_config.hiden_size: unknown key 'hiden_size' (not read and "
            "not on the ignore list; did you mean 'hidden_size'?)");
  EXPECT_EQ(parse_error(R"({"model_type": "llama4"})"),
            "config.json:1:2: model_type: llama4 needs a text_config object");
}

TEST(HfConfig, Errors) {
  EXPECT_EQ(parse_error("[1, 2]"), "config.json:1:1: expected a JSON object at top level");
  EXPECT_EQ(parse_error(R"({"hidden_size": 8})"),
            "config.json: model_type: missing required key (string)");
  EXPECT_EQ(
      parse_error(R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_local_experts": 4, "num_experts_per_tok": 1,
        "intermediate_size": 32, "vocab_size": 10, "max_position_embeddings": 16,
        "torch_dtype": "int8"})"),
      "config.json:4:9: torch_dtype: unknown value 'int8' (valid: bfloat16, float16, float32)");
  EXPECT_EQ(parse_error(R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_local_experts": 4, "num_experts_per_tok": 1,
        "intermediate_size": 32, "vocab_size": 10, "max_position_embeddings": 16,
        "quantization_config": {"quant_method": "bitsandbytes"}})"),
            "config.json:4:33: quantization_config.quant_method: unsupported quant_method "
            "'bitsandbytes' (valid: fp8, mxfp4, compressed-tensors, gptq, awq)");
}

}  // namespace
}  // namespace moesim::sim
