#include "sim/model/model_card.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/model/model_card_parser.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

ModelCard card(const std::string& name) {
  return load_model_card(std::string(MOESIM_SOURCE_DIR) + "/models/" + name);
}

std::string error_of(const ModelCard& c) {
  return testing::config_error_of([&] { validate_model_card(c); });
}

// Published totals and the counting convention of each publisher. DeepSeek and Moonshot count
// activated parameters without the input embedding; Mistral and Qwen with it.
struct Published {
  const char* file;
  double total_params;
  double active_params;
  bool active_includes_input_embedding;
  double active_tolerance;  // relative
};

TEST(ModelCard, PublicModelsMatchPublishedTotals) {
  const Published models[] = {
      // "37B" is rounded to the unit: the computed 36.63B is 1.01% below, inside the rounding
      // interval [36.5B, 37.5B), which is the tolerance used here.
      {"deepseek-v3.toml", 671e9, 37e9, false, 0.5 / 37},
      // Kimi K2's paper says 1.04T; the released config gives 1.0264T, the checkpoint's weight
      // count (1.03T). See models/kimi-k2.toml.
      {"kimi-k2.toml", 1.03e12, 32e9, false, 0.01},
      {"qwen3-235b-a22b.toml", 235e9, 22e9, true, 0.01},
      {"mixtral-8x7b.toml", 46.7e9, 12.9e9, true, 0.01},
      // Kimi-K3-class targets from the brief: 2.8T total, about 32B activated.
      {"kimi-k3.toml", 2.8e12, 32e9, false, 0.01},
  };
  for (const Published& p : models) {
    SCOPED_TRACE(p.file);
    const ModelCard c = card(p.file);
    EXPECT_NEAR(total_params(c) / p.total_params, 1.0, 0.01);
    const double active = p.active_includes_input_embedding
                              ? active_params(c)
                              : active_params_excluding_input_embedding(c);
    EXPECT_NEAR(active / p.active_params, 1.0, p.active_tolerance);
  }
}

TEST(ModelCard, PinnedParameterCounts) {
  // Regression pins of the formulas in model_card.cc (derivations in docs/models.md).
  EXPECT_EQ(total_params(card("deepseek-v3.toml")), 671026419200.0);
  EXPECT_EQ(active_params_excluding_input_embedding(card("deepseek-v3.toml")), 36625618432.0);
  EXPECT_EQ(total_params(card("kimi-k2.toml")), 1026408232448.0);
  EXPECT_EQ(active_params_excluding_input_embedding(card("kimi-k2.toml")), 31687095808.0);
  EXPECT_EQ(total_params(card("qwen3-235b-a22b.toml")), 235093634560.0);
  EXPECT_EQ(active_params(card("qwen3-235b-a22b.toml")), 22190763520.0);
  EXPECT_EQ(total_params(card("mixtral-8x7b.toml")), 46702792704.0);
  EXPECT_EQ(active_params(card("mixtral-8x7b.toml")), 12879925248.0);
  EXPECT_EQ(total_params(card("kimi-k3.toml")), 2789781807872.0);
  EXPECT_EQ(active_params_excluding_input_embedding(card("kimi-k3.toml")), 32018539264.0);
}

TEST(ModelCard, HandDerivedLayerCounts) {
  const ModelCard ds = card("deepseek-v3.toml");
  // q_a 7168*1536 + q_b 1536*128*192 + kv_a 7168*576 + kv_b 512*128*256 + o 128*128*7168
  // = 187,105,280 matrix weights, plus the q and kv latent norms (1536 + 512).
  EXPECT_EQ(attention_params(ds.layers[0].attention, ds.hidden_size), 187105280.0 + 2048.0);
  EXPECT_EQ(attention_projection_params(ds.layers[0].attention, ds.hidden_size), 187105280.0);
  const MoeSpec& moe = ds.layers[3].ffn.moe;
  EXPECT_EQ(expert_params(moe, ds.hidden_size), 3.0 * 7168 * 2048);
  EXPECT_EQ(expert_weight_bytes(ds, moe), 3.0 * 7168 * 2048);  // FP8: one byte per weight
  EXPECT_FALSE(ds.layers[2].ffn.is_moe);
  EXPECT_TRUE(ds.layers[3].ffn.is_moe);
  EXPECT_EQ(num_moe_layers(ds), 58);
  // MTP: one MoE layer (11,507,286,272) + two norms + the 2h x h projection + the head norm.
  EXPECT_EQ(mtp_params(ds), 11507286272.0 + 2 * 7168 + 2.0 * 7168 * 7168 + 7168);

  const ModelCard mx = card("mixtral-8x7b.toml");
  // q and o 4096 x 4096, k and v 4096 x 1024.
  EXPECT_EQ(attention_params(mx.layers[0].attention, mx.hidden_size),
            2.0 * 4096 * 4096 + 2.0 * 4096 * 1024);
}

TEST(ModelCard, DTypeBitsIncludeBlockScales) {
  EXPECT_EQ(bits_per_element(DType::kMXFP4), 4.25);  // 4 bits + one 8-bit scale per 32
  EXPECT_EQ(bits_per_element(DType::kMXFP8), 8.25);
  EXPECT_EQ(bits_per_element(DType::kNVFP4), 4.5);  // one 8-bit scale per 16
  EXPECT_EQ(bits_per_element(DType::kBF16), 16.0);
  EXPECT_EQ(dtype_bytes(DType::kMXFP4, 32), 17.0);  // 16 bytes of values + 1 scale byte
  EXPECT_EQ(*dtype_from_name("mxfp4"), DType::kMXFP4);
  EXPECT_EQ(dtype_name(DType::kNVFP4), "nvfp4");
  EXPECT_FALSE(dtype_from_name("fp4").has_value());

  const ModelCard k3 = card("kimi-k3.toml");
  const MoeSpec& moe = k3.layers[1].ffn.moe;
  EXPECT_EQ(expert_params(moe, k3.hidden_size), 3.0 * 4096 * 5376);
  EXPECT_EQ(expert_weight_bytes(k3, moe), 3.0 * 4096 * 5376 * 4.25 / 8);  // 35,094,528
  EXPECT_EQ(weight_bytes(k3, TensorGroup::kRoutedExperts),
            total_param_counts(k3).routed_experts * 4.25 / 8);
  EXPECT_EQ(weight_bytes(k3, TensorGroup::kAttention),
            total_param_counts(k3).group(TensorGroup::kAttention) * 2);
  double sum = 0;
  for (int g = 0; g < kNumTensorGroups; ++g) sum += weight_bytes(k3, static_cast<TensorGroup>(g));
  EXPECT_EQ(total_weight_bytes(k3), sum);
  // Every parameter is in exactly one group.
  double grouped = 0;
  const ParamCounts c = total_param_counts(k3);
  for (int g = 0; g < kNumTensorGroups; ++g) grouped += c.group(static_cast<TensorGroup>(g));
  EXPECT_EQ(grouped, c.total());
}

TEST(ModelCard, KvAndStateBytes) {
  const ModelCard ds = card("deepseek-v3.toml");
  // MLA latent: (kv_lora_rank 512 + rope 64) BF16 values per token and layer.
  EXPECT_EQ(kv_bytes_per_token(ds.layers[0].attention, DType::kBF16), (512 + 64) * 2.0);
  EXPECT_EQ(kv_bytes_per_token(ds), 61 * 1152.0);
  EXPECT_EQ(recurrent_state_bytes_per_sequence(ds), 0.0);

  const ModelCard qw = card("qwen3-235b-a22b.toml");
  // GQA K and V: 2 * 4 KV heads * 128 * 2 bytes.
  EXPECT_EQ(kv_bytes_per_token(qw.layers[0].attention, DType::kBF16), 2 * 4 * 128 * 2.0);
  EXPECT_EQ(kv_bytes_per_token(qw), 94 * 2048.0);

  const ModelCard k3 = card("kimi-k3.toml");
  EXPECT_EQ(num_layers_of_kind(k3, AttentionKind::kKDA), 36);
  EXPECT_EQ(num_layers_of_kind(k3, AttentionKind::kMLA), 12);
  EXPECT_EQ(k3.layers[3].attention.kind, AttentionKind::kMLA);
  EXPECT_EQ(k3.layers[4].attention.kind, AttentionKind::kKDA);
  EXPECT_EQ(kv_bytes_per_token(k3), 12 * 1152.0);  // KDA layers cache nothing per token
  // KDA state per layer: 32 heads * 128 * 128 FP32 plus 3 conv taps on q, k, v (3 * 4096).
  const double per_layer = (32.0 * 128 * 128 + 3.0 * 3 * 4096) * 4;
  EXPECT_EQ(recurrent_state_bytes_per_sequence(k3.layers[0].attention, DType::kFP32), per_layer);
  EXPECT_EQ(recurrent_state_bytes_per_sequence(k3), 36 * per_layer);
}

TEST(ModelCard, LatentMoeActsOnTheLatentDimension) {
  ModelCard c = card("tiny.toml");
  for (LayerSpec& l : c.layers) {
    if (l.ffn.is_moe) l.ffn.moe.latent_dim = 64;
  }
  validate_model_card(c);
  const MoeSpec& m = c.layers[1].ffn.moe;
  EXPECT_EQ(expert_params(m, c.hidden_size), 3.0 * 64 * 128);
  EXPECT_EQ(expert_activation_bytes(m, c.hidden_size, DType::kBF16), 128.0);
  EXPECT_EQ(expert_activation_bytes(card("tiny.toml").layers[1].ffn.moe, 256, DType::kFP8), 256);
}

TEST(ModelCard, ValidationNamesTheField) {
  ModelCard c = card("tiny.toml");
  c.source_file = "code";
  ModelCard bad = c;
  bad.layers[2].ffn.moe.top_k = 17;
  EXPECT_EQ(error_of(bad),
            "code: layers[2].ffn.moe.top_k: top_k (17) exceeds num_routed_experts (16)");
  bad = c;
  bad.layers[1].ffn.moe.num_expert_groups = 5;
  EXPECT_EQ(error_of(bad),
            "code: layers[1].ffn.moe.num_expert_groups: num_expert_groups (5) must divide "
            "num_routed_experts (16)");
  bad = c;
  bad.layers[1].ffn.moe.topk_groups = 8;
  EXPECT_EQ(error_of(bad),
            "code: layers[1].ffn.moe.topk_groups: topk_groups (8) exceeds num_expert_groups (4)");
  bad = c;
  bad.layers[0].attention = c.layers[0].attention;
  bad.layers[0].attention.kind = AttentionKind::kGQA;
  bad.layers[0].attention.gqa = {8, 3, 32, false};
  EXPECT_EQ(error_of(bad),
            "code: layers[0].attention.gqa.num_kv_heads: num_kv_heads (3) must divide num_heads "
            "(8)");
  bad = c;
  bad.hidden_size = 0;
  EXPECT_EQ(error_of(bad), "code: hidden_size: must be positive (got 0)");
  bad = c;
  bad.layers.clear();
  EXPECT_EQ(error_of(bad), "code: layers: a model needs at least one layer");
  EXPECT_EQ(error_of(c), "");
}

}  // namespace
}  // namespace moesim::sim
