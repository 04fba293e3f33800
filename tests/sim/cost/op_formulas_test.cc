// Per-token FLOPs of the cards' layers (the op formulas' FLOP helpers), checked against hand
// derivations and against each other.
#include "sim/cost/op_formulas.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/model/model_card_parser.h"

namespace moesim::sim {
namespace {

ModelCard card(const std::string& name) {
  return load_model_card(std::string(MOESIM_SOURCE_DIR) + "/models/" + name);
}

TEST(OpFormulasFlops, HandDerivedLayerFlops) {
  const ModelCard ds = card("deepseek-v3.toml");
  // 2 per matrix weight of the attention projections (187,105,280 of them; model_card_test).
  EXPECT_EQ(attention_projection_flops(ds.layers[0].attention, ds.hidden_size), 2 * 187105280.0);
  const MoeSpec& moe = ds.layers[3].ffn.moe;
  EXPECT_EQ(expert_flops_per_token(moe, ds.hidden_size), 6.0 * 7168 * 2048);
  EXPECT_EQ(router_flops(moe, ds.hidden_size), 2.0 * 7168 * 256);
  // A latent MoE's router adds its down and up projections.
  ModelCard c = card("tiny.toml");
  for (LayerSpec& l : c.layers) {
    if (l.ffn.is_moe) l.ffn.moe.latent_dim = 64;
  }
  EXPECT_EQ(router_flops(c.layers[1].ffn.moe, c.hidden_size), 2.0 * 256 * 16 + 4.0 * 256 * 64);
}

TEST(OpFormulasFlops, AttentionFlopsGrowWithContextExceptKda) {
  const ModelCard mx = card("mixtral-8x7b.toml");
  // GQA: 4 * heads * head_dim per context token and layer.
  EXPECT_EQ(decode_flops_per_token(mx, 8192) - decode_flops_per_token(mx, 4096),
            32 * 4.0 * 32 * 128 * 4096);
  const ModelCard k3 = card("kimi-k3.toml");
  // Only the 12 MLA layers grow (absorbed: 2 * heads * (2 * 512 + 64)); KDA is constant.
  EXPECT_EQ(decode_flops_per_token(k3, 8192) - decode_flops_per_token(k3, 4096),
            12 * 2.0 * 32 * (2 * 512 + 64) * 4096);
  const AttentionSpec& kda = k3.layers[0].attention;
  EXPECT_EQ(attention_core_flops(kda, 1, true), attention_core_flops(kda, 1 << 20, true));
  EXPECT_EQ(attention_core_flops(kda, 1, false), 7.0 * 32 * 128 * 128);
  const AttentionSpec& mla = k3.layers[3].attention;
  EXPECT_EQ(attention_core_flops(mla, 100, false), 2.0 * 32 * (128 + 64 + 128) * 100);
}

TEST(OpFormulasFlops, DecodeFlopsAreTwicePerActiveWeightAtShortContext) {
  for (const char* f : {"deepseek-v3.toml", "mixtral-8x7b.toml", "kimi-k3.toml"}) {
    SCOPED_TRACE(f);
    const ModelCard c = card(f);
    // Every active weight except the input embedding does one multiply-add per token; norms and
    // per-head scalars are the small remainder. The attention cores come on top.
    double core_flops = 0;
    for (const LayerSpec& l : c.layers) core_flops += attention_core_flops(l.attention, 1, true);
    EXPECT_NEAR((decode_flops_per_token(c, 1) - core_flops) /
                    (2 * active_params_excluding_input_embedding(c)),
                1.0, 1e-4);
  }
}

TEST(OpFormulasFlops, PrefillIsTheMeanOfCausalPositions) {
  const ModelCard mx = card("mixtral-8x7b.toml");
  const int64_t prompt_tokens = 257;
  double sum = 0;  // obvious implementation: token i attends to i + 1 tokens
  for (int64_t i = 0; i < prompt_tokens; ++i) sum += decode_flops_per_token(mx, i + 1);
  EXPECT_NEAR(prefill_flops_per_token(mx, prompt_tokens) / (sum / prompt_tokens), 1.0, 1e-12);
  // MLA prefill uses the non-absorbed form, which is cheaper per context token.
  const ModelCard ds = card("deepseek-v3.toml");
  EXPECT_LT(prefill_flops_per_token(ds, 8191), decode_flops_per_token(ds, 4096));
}

}  // namespace
}  // namespace moesim::sim
