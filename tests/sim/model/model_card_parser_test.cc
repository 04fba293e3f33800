#include "sim/model/model_card_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "sim/config/toml_source.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

const std::string kSource = MOESIM_SOURCE_DIR;

std::string load_error(const std::string& path) {
  return testing::config_error_of([&] { load_model_card(path); });
}

TEST(ModelCardParser, EveryShippedCardLoads) {
  int num_cards = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSource + "/models")) {
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    const ModelCard c = load_model_card(path);
    EXPECT_FALSE(c.layers.empty());
    EXPECT_EQ(c.source_file, path);
    ++num_cards;
  }
  EXPECT_GE(num_cards, 7);
}

TEST(ModelCardParser, ExpandsLayerPatternAndDenseLayers) {
  const ModelCard c = load_model_card(kSource + "/models/tiny.toml");
  ASSERT_EQ(c.layers.size(), 4u);
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.layers[0].attention.kind, AttentionKind::kMLA);
  EXPECT_EQ(c.layers[1].attention.kind, AttentionKind::kKDA);
  EXPECT_EQ(c.layers[2].attention.kind, AttentionKind::kMLA);
  EXPECT_FALSE(c.layers[0].ffn.is_moe);
  EXPECT_EQ(c.layers[0].ffn.intermediate_size, 512);
  EXPECT_TRUE(c.layers[3].ffn.is_moe);
  EXPECT_EQ(c.layers[3].ffn.moe.shared_intermediate_size, 128);  // defaults to the expert's
  EXPECT_EQ(c.layers[3].ffn.moe.scoring, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.layers[1].attention.kda.gate_lora_rank, 32);
  EXPECT_EQ(c.precision.routed_experts, DType::kBF16);  // default
  EXPECT_EQ(c.precision.recurrent_state, DType::kFP32);
  EXPECT_EQ(c.precision.core_attention, DType::kBF16);  // default
  const ModelCard k3 = load_model_card(kSource + "/models/kimi-k3.toml");
  EXPECT_EQ(k3.precision.routed_experts, DType::kMXFP4);
  // DeepSeek-V3: FP8 projections, BF16 attention core (FlashMLA).
  const ModelCard ds = load_model_card(kSource + "/models/deepseek-v3.toml");
  EXPECT_EQ(ds.precision.attention, DType::kFP8);
  EXPECT_EQ(ds.precision.core_attention, DType::kBF16);
  EXPECT_EQ(k3.max_context_tokens, 1048576);
}

TEST(ModelCardParser, PatternNeedNotDivideTheLayerCountAndMoeLayerFreqApplies) {
  auto doc = TomlDocument::parse_string(R"(
name = "p"
hidden_size = 64
vocab_size = 100
max_context_tokens = 128
num_layers = 5
attention_pattern = "kda, kda, gqa"
[attention.kda]
num_heads = 2
head_dim_k = 16
head_dim_v = 16
output_gate = false
[attention.gqa]
num_heads = 4
num_kv_heads = 1
head_dim = 16
[ffn]
first_k_dense = 1
moe_layer_freq = 2
dense_intermediate_size = 96
[ffn.moe]
num_routed_experts = 4
top_k = 1
expert_intermediate_size = 32
)",
                                        "p.toml");
  TomlTable root = doc.root();
  const ModelCard c = parse_model_card(root);
  const AttentionKind kinds[] = {AttentionKind::kKDA, AttentionKind::kKDA, AttentionKind::kGQA,
                                 AttentionKind::kKDA, AttentionKind::kKDA};
  const bool moe[] = {false, false, true, false, true};  // i >= 1 and i % 2 == 0
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(c.layers[i].attention.kind, kinds[i]) << i;
    EXPECT_EQ(c.layers[i].ffn.is_moe, moe[i]) << i;
  }
  EXPECT_FALSE(c.layers[0].attention.kda.output_gate);
  EXPECT_EQ(c.source_file, "p.toml");
}

TEST(ModelCardParser, EmbeddedTableReportsItsKeyPath) {
  auto doc = TomlDocument::parse_string(R"([model]
name = "dense"
hidden_size = 64
vocab_size = 100
max_context_tokens = 128
num_layers = 2
attention_pattern = "gqa"
[model.attention.gqa]
num_heads = 4
num_kv_heads = 4
head_dim = 16
[model.ffn]
dense_intermediate_size = 96
first_k_dense = 1
)",
                                        "scenario.toml");
  TomlTable model = doc.root().get_table("model");
  try {
    parse_model_card(model);
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "scenario.toml:14:17: model.ffn.first_k_dense: needs an [ffn.moe] table (without "
              "it every layer is dense)");
  }
}

TEST(ModelCardParser, DenseModelWithoutMoeTable) {
  auto doc = TomlDocument::parse_string(R"(
name = "dense"
hidden_size = 64
vocab_size = 100
max_context_tokens = 128
num_layers = 2
attention_pattern = "gqa"
[attention.gqa]
num_heads = 4
num_kv_heads = 4
head_dim = 16
[ffn]
dense_intermediate_size = 96
)",
                                        "d.toml");
  TomlTable root = doc.root();
  const ModelCard c = parse_model_card(root);
  EXPECT_EQ(num_moe_layers(c), 0);
  // 2 layers * (4 * 64 * 64 attention + 3 * 64 * 96 FFN + 2 * 64 norms) + 64 final norm
  // + 2 * 100 * 64 embedding and head.
  EXPECT_EQ(total_params(c), 2.0 * (4 * 64 * 64 + 3 * 64 * 96 + 2 * 64) + 64 + 2 * 100 * 64);
  EXPECT_EQ(active_params(c), total_params(c));
}

// precision.router defaults to the shared experts' dtype (unset) and may be given apart.
TEST(ModelCardParser, RouterPrecisionFollowsSharedExpertsUnlessGiven) {
  const std::string card = R"(
name = "r"
hidden_size = 64
vocab_size = 100
max_context_tokens = 128
num_layers = 1
attention_pattern = "gqa"
[attention.gqa]
num_heads = 4
num_kv_heads = 4
head_dim = 16
[ffn.moe]
num_routed_experts = 4
top_k = 1
expert_intermediate_size = 32
[precision]
shared_experts = "fp8"
)";
  for (const auto& [extra, expected] :
       {std::pair{std::string(), DType::kFP8},
        std::pair{std::string("router = \"bf16\"\n"), DType::kBF16}}) {
    auto doc = TomlDocument::parse_string(card + extra, "r.toml");
    TomlTable root = doc.root();
    const ModelCard c = parse_model_card(root);
    EXPECT_EQ(c.precision.router.has_value(), !extra.empty());
    EXPECT_EQ(tensor_group_dtype(c.precision, TensorGroup::kRouter), expected);
    EXPECT_EQ(weight_bytes(c, TensorGroup::kRouter), 64.0 * 4 * bits_per_element(expected) / 8);
  }
}

// The bad-input corpus: each file and the exact message it must produce (after the path).
TEST(ModelCardParser, BadInputCorpus) {
  const std::pair<const char*, const char*> cases[] = {
      {"unknown_key.toml",
       ":11:1: attention.mla.q_lora_rnk: unknown key 'q_lora_rnk' (did you mean 'q_lora_rank'?)"},
      {"missing_key.toml", ":1:1: vocab_size: missing required key (integer)"},
      {"wrong_type.toml", ":2:15: hidden_size: expected an integer, got string"},
      {"out_of_range.toml", ":2:15: hidden_size: value 0 is out of range [1, 16777216]"},
      {"topk_exceeds_experts.toml",
       ":30:9: ffn.moe.top_k: top_k (17) exceeds num_routed_experts (16)"},
      {"topk_exceeds_selected_groups.toml",
       ":30:9: ffn.moe.top_k: top_k (9) exceeds the 8 experts in the topk_groups selected groups"},
      {"groups_not_dividing_experts.toml",
       ":33:21: ffn.moe.num_expert_groups: num_expert_groups (3) must divide "
       "num_routed_experts (16)"},
      {"topk_groups_exceed_groups.toml",
       ":34:15: ffn.moe.topk_groups: value 5 is out of range [1, 4]"},
      {"bad_dtype.toml",
       ":38:18: precision.routed_experts: unknown value 'fp4' (valid: fp32, bf16, fp16, fp8, "
       "mxfp8, mxfp4, nvfp4)"},
      {"bad_layer_pattern.toml",
       ":7:21: attention_pattern: bad layer pattern 'mla,swa,mla': element 2 'swa' is not a "
       "layer kind (valid: mla, gqa, kda)"},
      {"empty_layer_pattern_element.toml",
       ":7:21: attention_pattern: bad layer pattern 'mla,,kda': element 2 is empty (write kinds "
       "separated by commas, e.g. \"kda,kda,kda,mla\")"},
      {"unused_attention_table.toml",
       ":17:1: attention.kda: table given but attention_pattern has no 'kda' layer"},
      {"missing_attention_table.toml",
       ":9:1: attention.gqa: missing required table (attention_pattern uses it)"},
      {"toml_syntax_error.toml",
       ":2:15: TOML syntax error: Error while parsing value: could not determine value type"},
      {"latent_dim_exceeds_hidden.toml",
       ":33:14: ffn.moe.latent_dim: value 512 is out of range [0, 256]"},
      {"dense_size_without_dense_layers.toml",
       ":26:27: ffn.dense_intermediate_size: given but no layer is dense"},
      {"hf_unknown_key.config.json",
       ":34:3: num_nextn_predict_layer: unknown key 'num_nextn_predict_layer' (not read and not "
       "on the ignore list; did you mean 'num_nextn_predict_layers'?)"},
      {"hf_missing_key.config.json", ": kv_lora_rank: missing required key (integer)"},
      {"hf_wrong_type.config.json", ":18:3: hidden_size: expected an integer, got float"},
      // Numbers outside their type (issue 19): refused, never wrapped (18446744073709551615 read
      // as -1 before) or thrown as the JSON library's own exception (1e400).
      {"hf_above_int64.config.json",
       ":18:3: hidden_size: value 18446744073709551615 is out of range [1, 16777216]"},
      {"hf_int64_max.config.json",
       ":18:3: hidden_size: value 9223372036854775807 is out of range [1, 16777216]"},
      {"hf_number_overflow.config.json",
       ":19:24: number out of range '1e400' (beyond double precision)"},
      {"hf_topk_exceeds_experts.config.json",
       ":31:3: num_experts_per_tok: num_experts_per_tok (300) exceeds the number of routed "
       "experts (256)"},
      {"hf_groups_not_dividing_experts.config.json",
       ":26:3: n_group: n_group (7) must divide the number of routed experts (256)"},
      {"hf_unsupported_model_type.config.json",
       ":23:3: model_type: unsupported model_type 'llama' (valid: deepseek_v2, deepseek_v3, "
       "kimi_k2, glm4_moe, qwen2_moe, qwen3_moe, mixtral, llama4, llama4_text, gpt_oss)"},
      {"hf_unsupported_quant.config.json",
       ":30:5: quantization_config.quant_method: unsupported quant_method 'hqq' (valid: fp8, "
       "mxfp4, compressed-tensors, gptq, awq)"},
      {"hf_huge_number.config.json",
       ":9:18: number out of range '1e400' (beyond double precision)"},
      {"hf_unmapped_ignore.config.json",
       ":46:5: quantization_config.ignore: cannot map module 're:.*conv1d.*' to a tensor group "
       "(supported: lm_head, embed_tokens, self_attn, mlp.gate / router, experts, "
       "shared_experts, mlp.(gate|up|gate_up|down)_proj, vision/multimodal modules; as names, "
       "globs or re: patterns)"},
      {"hf_json_syntax_error.config.json",
       ":19:21: JSON syntax error: syntax error while parsing object - unexpected string "
       "literal; expected '}'"},
  };
  int num_files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(kSource + "/tests/data/bad/models")) {
    (void)entry;
    ++num_files;
  }
  EXPECT_EQ(num_files, static_cast<int>(std::size(cases))) << "every bad file has a case";
  for (const auto& [file, message] : cases) {
    const std::string path = kSource + "/tests/data/bad/models/" + file;
    EXPECT_EQ(load_error(path), path + message);
  }
}

TEST(ModelCardParser, MissingFileIsAnError) {
  EXPECT_EQ(load_error("no/such/card.toml"), "no/such/card.toml: cannot open file");
  EXPECT_EQ(load_error("no/such/config.json"), "no/such/config.json: cannot open file");
}

}  // namespace
}  // namespace moesim::sim
