#include "sim/output/model_summary.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/cost/op_formulas.h"
#include "sim/cost/op_formulas.h"
#include "sim/model/model_card_parser.h"

namespace moesim::sim {
namespace {

ModelCard card(const std::string& name) {
  return load_model_card(std::string(MOESIM_SOURCE_DIR) + "/models/" + name);
}

TEST(ModelSummary, GathersTheDerivedQuantities) {
  const ModelCard k3 = card("kimi-k3.toml");
  const ModelSummary s = describe_model(k3, 8192);
  EXPECT_EQ(s.context_tokens, 8192);
  EXPECT_EQ(s.num_layers, 48);
  EXPECT_EQ(s.num_moe_layers, 47);
  EXPECT_EQ(s.num_dense_layers, 1);
  EXPECT_EQ(s.total_params, total_params(k3));
  EXPECT_EQ(s.active_params, active_params(k3));
  EXPECT_EQ(s.active_params_excluding_input_embedding, active_params_excluding_input_embedding(k3));
  EXPECT_EQ(s.total_weight_bytes, total_weight_bytes(k3));
  ASSERT_EQ(s.weights.size(), 6u);
  EXPECT_EQ(s.weights[2].group, TensorGroup::kRoutedExperts);
  EXPECT_EQ(s.weights[4].group, TensorGroup::kRouter);
  EXPECT_EQ(s.weights[4].dtype, DType::kBF16);  // unset router precision: as shared_experts
  EXPECT_EQ(s.weights[2].dtype, DType::kMXFP4);
  EXPECT_EQ(s.expert_weight_bytes, expert_weight_bytes(k3, k3.layers[1].ffn.moe));
  ASSERT_EQ(s.by_kind.size(), 2u);  // MLA then KDA
  EXPECT_EQ(s.by_kind[0].kind, AttentionKind::kMLA);
  EXPECT_EQ(s.by_kind[0].num_layers, 12);
  EXPECT_EQ(s.by_kind[0].kv_bytes_per_token_per_layer, 1152.0);
  EXPECT_EQ(s.by_kind[1].kind, AttentionKind::kKDA);
  EXPECT_EQ(s.by_kind[1].kv_bytes_per_token_per_layer, 0.0);
  EXPECT_GT(s.by_kind[1].recurrent_state_bytes_per_sequence_per_layer, 0.0);
  EXPECT_EQ(s.kv_bytes_per_sequence_at_context, kv_bytes_per_token(k3) * 8192);
  EXPECT_EQ(s.recurrent_state_bytes_per_sequence, recurrent_state_bytes_per_sequence(k3));
  EXPECT_EQ(s.decode_flops_per_token, decode_flops_per_token(k3, 8192));
  EXPECT_EQ(s.prefill_flops_per_token, prefill_flops_per_token(k3, 8192));
}

TEST(ModelSummary, DenseFfnGroupOmittedWhenEmpty) {
  const ModelSummary s = describe_model(card("mixtral-8x7b.toml"), 4096);
  ASSERT_EQ(s.weights.size(), 4u);  // no dense FFN layers, no shared experts
  EXPECT_EQ(s.weights[1].group, TensorGroup::kRoutedExperts);
  EXPECT_EQ(s.weights[2].group, TensorGroup::kRouter);  // not reported as shared experts
  EXPECT_EQ(s.num_mtp_layers, 0);
}

TEST(ModelSummary, JsonCarriesTheSameNumbersWithUnitsInKeys) {
  const ModelSummary s = describe_model(card("deepseek-v3.toml"), 4096);
  const nlohmann::json j = nlohmann::json::parse(format_model_summary_json(s));
  EXPECT_EQ(j["name"], "deepseek-v3");
  EXPECT_EQ(j["context_tokens"], 4096);
  EXPECT_EQ(j["total_params"].get<double>(), s.total_params);
  EXPECT_EQ(j["active_params"].get<double>(), s.active_params);
  EXPECT_EQ(j["active_params_excluding_input_embedding"].get<double>(),
            s.active_params_excluding_input_embedding);
  EXPECT_EQ(j["mtp_params"].get<double>(), s.mtp_params);
  EXPECT_EQ(j["kv_bytes_per_token"].get<double>(), 61 * 1152.0);
  EXPECT_EQ(j["kv_bytes_per_sequence_at_context"].get<double>(), 61 * 1152.0 * 4096);
  EXPECT_EQ(j["recurrent_state_bytes_per_sequence"].get<double>(), 0.0);
  EXPECT_EQ(j["decode_flops_per_token"].get<double>(), s.decode_flops_per_token);
  EXPECT_EQ(j["prefill_flops_per_token"].get<double>(), s.prefill_flops_per_token);
  EXPECT_EQ(j["total_weight_bytes"].get<double>(), s.total_weight_bytes);
  EXPECT_EQ(j["weights_by_group"][2]["group"], "routed_experts");
  EXPECT_EQ(j["weights_by_group"][2]["dtype"], "fp8");
  EXPECT_EQ(j["weights_by_group"][2]["weight_bytes"].get<double>(), s.weights[2].weight_bytes);
  EXPECT_EQ(j["attention_kinds"][0]["kind"], "mla");
  EXPECT_EQ(j["attention_kinds"][0]["kv_bytes_per_token_per_layer"].get<double>(), 1152.0);
  EXPECT_EQ(j["total_params_by_component"]["routed_expert_params"].get<double>(),
            s.total.routed_experts);
  EXPECT_EQ(j["active_params_by_component"]["routed_expert_params"].get<double>(),
            s.active.routed_experts);
}

TEST(ModelSummary, TextReport) {
  const std::string text = format_model_summary_text(describe_model(card("kimi-k3.toml"), 4096));
  for (const char* expected : {
           "model kimi-k3 (",
           "  total                                  2.7898 T\n",
           "  active without input embedding         32.019 B\n",
           "  routed_experts (mxfp4)                 2.7819 T params, 1.344 TiB\n",
           "  mla KV per token per layer             1.125 KiB\n",
           "  kda state per sequence per layer       2.141 MiB\n",
           "  KV per sequence at 4096 tokens         54.000 MiB\n",
           "FLOPs per token at context 4096\n",
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
}

}  // namespace
}  // namespace moesim::sim
