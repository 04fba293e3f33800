// The HuggingFace config.json corpus (tests/data/hf/*/config.json, origins in
// tests/data/hf/SOURCES.md): every file imports, and its total / activated parameters and, for
// quantised checkpoints, its weight bytes are pinned to the publicly stated figures with the
// tolerance given per row. A row that drifts outside its tolerance is a counting change to
// explain, not a number to re-pin.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/model/hf_config.h"
#include "sim/model/model_card_parser.h"

namespace moesim::sim {
namespace {

const std::string kCorpus = std::string(MOESIM_SOURCE_DIR) + "/tests/data/hf/";

ModelCard corpus(const std::string& dir) { return load_model_card(kCorpus + dir + "/config.json"); }

// How the publisher counts activated parameters.
enum class Active {
  kWithEmbedding,            // every parameter a token passes through (Mistral, Qwen, Meta)
  kWithoutEmbedding,         // without the input embedding table (DeepSeek, Moonshot, OpenAI)
  kWithoutEmbeddingAndHead,  // without input embedding and output head (matches Zhipu's GLM
                             // figure: with the head it is 32.85B, 2.7% above 32B)
};

struct Published {
  const char* dir;
  double total_params;
  double active_params;
  Active convention;
  double tolerance;  // relative, on both figures
  const char* source;
};

// Published totals. Tolerances cover what the cards do not count (biases, the vision tower,
// gates of one element) and the rounding of the published figure.
const Published kPublished[] = {
    {"deepseek-v3", 671e9, 37e9, Active::kWithoutEmbedding, 0.015,
     "DeepSeek-V3 technical report: 671B total, 37B activated (MTP module excluded)"},
    {"kimi-k2-instruct", 1.04e12, 32e9, Active::kWithoutEmbedding, 0.02,
     "Moonshot Kimi K2 model card: 1.04T total (\"1T\"), 32B activated"},
    {"kimi-k2-thinking", 1.04e12, 32e9, Active::kWithoutEmbedding, 0.02,
     "Kimi-K2-Thinking model card: same architecture as K2"},
    // 3.3B is rounded to 0.1B: the count is 3.353B (1.6% above).
    {"qwen3-30b-a3b", 30.5e9, 3.3e9, Active::kWithEmbedding, 0.02,
     "Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"},
    {"qwen3-30b-a3b-transformers5", 30.5e9, 3.3e9, Active::kWithEmbedding, 0.02,
     "the same model in transformers-5 key names"},
    {"mixtral-8x7b-v0.1", 46.7e9, 12.9e9, Active::kWithEmbedding, 0.01,
     "Mistral AI, Mixtral of experts: 46.7B total, 12.9B active"},
    {"mixtral-8x7b-instruct-v0.1-awq", 46.7e9, 12.9e9, Active::kWithEmbedding, 0.01,
     "Mixtral 8x7B, AWQ checkpoint of the same architecture"},
    {"gpt-oss-20b", 20.91e9, 3.61e9, Active::kWithoutEmbedding, 0.01,
     "OpenAI gpt-oss model card, table 1: 20.91B total, 3.61B active"},
    {"gpt-oss-120b", 116.83e9, 5.13e9, Active::kWithoutEmbedding, 0.01,
     "OpenAI gpt-oss model card, table 1: 116.83B total, 5.13B active"},
    {"glm-4.7", 355e9, 32e9, Active::kWithoutEmbeddingAndHead, 0.015,
     "Zhipu GLM-4.5 / 4.6 / 4.7: 355B total, 32B active (MTP layer excluded)"},
    {"llama-4-scout-17b-16e", 109e9, 17e9, Active::kWithEmbedding, 0.02,
     "Meta Llama 4 Scout: 109B total, 17B active (text model; the total includes the vision "
     "encoder)"},
    {"llama-4-maverick-17b-128e", 400e9, 17e9, Active::kWithEmbedding, 0.02,
     "Meta Llama 4 Maverick: 400B total, 17B active"},
    {"qwen1.5-moe-a2.7b-chat-gptq-int4", 14.3e9, 2.7e9, Active::kWithEmbedding, 0.02,
     "Qwen1.5-MoE-A2.7B blog: 14.3B total, 2.7B activated"},
};

TEST(HfCorpus, PublishedParameterCounts) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(std::string(p.dir) + " (" + p.source + ")");
    const ModelCard c = corpus(p.dir);
    const double total = total_params(c);
    const ParamCounts a = active_param_counts(c);
    const double active = p.convention == Active::kWithEmbedding ? a.total()
                          : p.convention == Active::kWithoutEmbedding
                              ? a.total() - a.embedding
                              : a.total() - a.embedding - a.lm_head;
    EXPECT_NEAR(total / p.total_params, 1.0, p.tolerance) << total;
    EXPECT_NEAR(active / p.active_params, 1.0, p.tolerance) << active;
  }
}

// The transformers-5 spelling (dtype, num_local_experts, rope_parameters) imports to the same
// card as the 4.51 file it was rewritten from.
TEST(HfCorpus, Transformers5KeyNamesImportLikeTransformers4) {
  ModelCard v5 = corpus("qwen3-30b-a3b-transformers5");
  const ModelCard v4 = corpus("qwen3-30b-a3b");
  v5.source_file = v4.source_file;
  EXPECT_TRUE(v5 == v4);
}

// ---- weight bytes of quantised checkpoints ----------------------------------------------------

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

TEST(HfCorpus, GptOssMxfp4CheckpointSize) {
  // OpenAI gpt-oss model card, table 1: checkpoint 12.8 GiB (20b) and 60.8 GiB (120b): MXFP4
  // experts (4.25 bits), everything else BF16.
  for (const auto& [dir, gib] : {std::pair{"gpt-oss-20b", 12.8}, std::pair{"gpt-oss-120b", 60.8}}) {
    SCOPED_TRACE(dir);
    const ModelCard c = corpus(dir);
    EXPECT_EQ(c.precision.routed_experts, DType::kMXFP4);
    EXPECT_EQ(c.precision.attention, DType::kBF16);
    EXPECT_EQ(tensor_group_dtype(c.precision, TensorGroup::kRouter), DType::kBF16);
    EXPECT_NEAR(total_weight_bytes(c) / kGiB / gib, 1.0, 0.01) << total_weight_bytes(c) / kGiB;
  }
}

TEST(HfCorpus, KimiK2ThinkingInt4CheckpointSize) {
  // compressed-tensors int4, group 32, bf16 scales on the routed experts only (attention, shared
  // experts, dense MLP and lm_head ignored); the Hugging Face repository holds ~594 GB.
  const ModelCard c = corpus("kimi-k2-thinking");
  const Precision& p = c.precision;
  EXPECT_DOUBLE_EQ(weight_bits_per_element(p, TensorGroup::kRoutedExperts), 4.0 + 16.0 / 32.0);
  for (TensorGroup g :
       {TensorGroup::kAttention, TensorGroup::kDenseFfn, TensorGroup::kSharedExperts,
        TensorGroup::kRouter, TensorGroup::kEmbeddings}) {
    EXPECT_DOUBLE_EQ(weight_bits_per_element(p, g), 16.0) << tensor_group_name(g);
  }
  EXPECT_NEAR(total_weight_bytes(c) / 594e9, 1.0, 0.02) << total_weight_bytes(c) / 1e9;
  // One routed expert: 3 x 7168 x 2048 weights at 4.5 bits.
  EXPECT_DOUBLE_EQ(expert_weight_bytes(c, c.layers[1].ffn.moe), 3.0 * 7168 * 2048 * 4.5 / 8.0);
}

TEST(HfCorpus, DeepSeekV3Fp8BlockScales) {
  // fp8 e4m3 with one fp32 scale per 128x128 block on every Linear; MoEGate, embedding and
  // lm_head stay BF16. The published checkpoint (model weights without MTP) is ~671 GB at
  // ~1 byte per weight plus BF16 embeddings.
  const ModelCard c = corpus("deepseek-v3");
  const Precision& p = c.precision;
  EXPECT_EQ(p.routed_experts, DType::kFP8);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(p, TensorGroup::kRoutedExperts),
                   8.0 + 32.0 / (128.0 * 128.0));
  EXPECT_EQ(tensor_group_dtype(p, TensorGroup::kRouter), DType::kBF16);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(p, TensorGroup::kEmbeddings), 16.0);
  const ParamCounts n = total_param_counts(c);
  const double expected =
      (n.attention + n.norms + n.dense_ffn + n.routed_experts + n.shared_experts) *
          (8.0 + 32.0 / 16384.0) / 8.0 +
      (n.router + n.embedding + n.lm_head) * 2.0;
  EXPECT_NEAR(total_weight_bytes(c) / expected, 1.0, 1e-12);
}

TEST(HfCorpus, GptqAndAwqBytesCountScalesZerosAndIndices) {
  // GPTQ int4 g128 (Qwen1.5-MoE-A2.7B-Chat-GPTQ-Int4): attention, shared expert and routed
  // experts quantised (modules_in_block_to_quantize); router, shared-expert gate, embeddings and
  // lm_head FP16. Per weight: 4 bits + fp16 scale and 4-bit zero per 128 + int32 g_idx per input
  // row (counted at hidden_size = 2048).
  const ModelCard gptq = corpus("qwen1.5-moe-a2.7b-chat-gptq-int4");
  const double gptq_bits = 4.0 + (16.0 + 4.0) / 128.0 + 32.0 / 2048.0;
  for (TensorGroup g :
       {TensorGroup::kAttention, TensorGroup::kRoutedExperts, TensorGroup::kSharedExperts}) {
    EXPECT_DOUBLE_EQ(weight_bits_per_element(gptq.precision, g), gptq_bits) << tensor_group_name(g);
    EXPECT_EQ(tensor_group_dtype(gptq.precision, g), DType::kFP16);
  }
  EXPECT_DOUBLE_EQ(weight_bits_per_element(gptq.precision, TensorGroup::kRouter), 16.0);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(gptq.precision, TensorGroup::kEmbeddings), 16.0);

  // AWQ int4 g128 with zero points (Mixtral-8x7B-Instruct-v0.1-AWQ): every Linear but the
  // router ("gate" in modules_to_not_convert); no dtype key, so BF16 elsewhere.
  const ModelCard awq = corpus("mixtral-8x7b-instruct-v0.1-awq");
  const double awq_bits = 4.0 + (16.0 + 4.0) / 128.0;
  EXPECT_DOUBLE_EQ(weight_bits_per_element(awq.precision, TensorGroup::kRoutedExperts), awq_bits);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(awq.precision, TensorGroup::kAttention), awq_bits);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(awq.precision, TensorGroup::kRouter), 16.0);
  const ParamCounts n = total_param_counts(awq);
  // 45.1B quantised weights (attention, its norms, experts) at 4.156 bits + BF16 embeddings,
  // head and routers: 24.7 GB.
  EXPECT_NEAR(total_weight_bytes(awq),
              (n.attention + n.norms + n.routed_experts) * awq_bits / 8.0 +
                  (n.router + n.embedding + n.lm_head) * 2.0,
              1.0);
}

// The router is its own tensor group: a model without shared experts reports no shared-expert
// weights (it used to report its router there).
TEST(HfCorpus, RouterIsNotReportedAsSharedExperts) {
  const ModelCard mixtral = corpus("mixtral-8x7b-v0.1");
  EXPECT_EQ(weight_bytes(mixtral, TensorGroup::kSharedExperts), 0.0);
  EXPECT_EQ(total_param_counts(mixtral).group(TensorGroup::kSharedExperts), 0.0);
  // 32 layers x 4096 x 8 router weights.
  EXPECT_EQ(total_param_counts(mixtral).group(TensorGroup::kRouter), 32.0 * 4096 * 8);
  EXPECT_EQ(weight_bytes(mixtral, TensorGroup::kRouter), 32.0 * 4096 * 8 * 2);
}

}  // namespace
}  // namespace moesim::sim
