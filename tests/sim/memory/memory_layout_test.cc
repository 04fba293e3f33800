// Per-GPU memory layout: sections sum to HBM, weights follow placement and TP, a deployment that
// does not fit is refused with a clear message; DeepSeek-V3 FP8 checked against hand numbers.
#include "sim/memory/memory_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/model/model_card_parser.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {
namespace {

const std::string kModels = MOESIM_SOURCE_DIR "/models/";

const ModelCard& deepseek() {
  static const ModelCard card = load_model_card(kModels + "deepseek-v3.toml");
  return card;
}
const ModelCard& tiny() {
  static const ModelCard card = load_model_card(kModels + "tiny.toml");
  return card;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// DeepSeek-V3 with 256 experts over 8 GPUs: 32 slots per MoE layer, 58 MoE layers.
GpuMemoryInputs deepseek_ep8(const std::string& gpu) {
  GpuMemoryInputs in;
  in.hbm_bytes = find_gpu_spec(gpu)->hbm_bytes;
  in.routed_expert_slots = 32 * 58;
  in.kv_block_tokens = 64;
  in.workspace_bytes = 4LL << 30;
  in.reserve_fraction = 0.05;
  return in;
}

TEST(MemoryLayoutTest, SectionsSumToHbm) {
  GpuMemoryInputs in = deepseek_ep8("h200-sxm");
  std::string error = "unset";
  GpuMemoryLayout m = compute_gpu_memory_layout(deepseek(), in, &error);
  ASSERT_EQ(error, "");
  const double hbm = static_cast<double>(in.hbm_bytes);
  EXPECT_NEAR(m.weight_bytes() + m.workspace_bytes + m.reserve_bytes + m.kv_pool_bytes, hbm,
              hbm * 1e-12);
  EXPECT_DOUBLE_EQ(m.workspace_bytes, 4.0 * kGiB);
  EXPECT_DOUBLE_EQ(m.reserve_bytes, 0.05 * hbm);
  EXPECT_EQ(m.num_kv_blocks, static_cast<int64_t>(std::floor(m.kv_pool_bytes / m.kv_block_bytes)));
  EXPECT_LE(static_cast<double>(m.num_kv_blocks) * m.kv_block_bytes, m.kv_pool_bytes);
  EXPECT_GT(static_cast<double>(m.num_kv_blocks + 1) * m.kv_block_bytes, m.kv_pool_bytes);
}

TEST(MemoryLayoutTest, DeepSeekV3Fp8On8xH200Fits) {
  GpuMemoryInputs in = deepseek_ep8("h200-sxm");
  std::string error;
  GpuMemoryLayout m = compute_gpu_memory_layout(deepseek(), in, &error);
  ASSERT_EQ(error, "");
  // One routed expert: 3 x 7168 x 2048 FP8 weights = 44,040,192 bytes; 32 x 58 slots per GPU.
  EXPECT_DOUBLE_EQ(m.routed_expert_weight_bytes, 44'040'192.0 * 32 * 58);
  // Embedding and head in BF16: 2 x 129280 x 7168 x 2 bytes.
  EXPECT_DOUBLE_EQ(m.embedding_weight_bytes, 2.0 * 129280 * 7168 * 2);
  // Three dense layers of 3 x 7168 x 18432 FP8 weights.
  EXPECT_DOUBLE_EQ(m.dense_ffn_weight_bytes, 3.0 * 3 * 7168 * 18432);
  // Full attention on every GPU (DP attention).
  EXPECT_DOUBLE_EQ(m.attention_weight_bytes, weight_bytes(deepseek(), TensorGroup::kAttention));
  // About 100 GB of weights per GPU, about 25 GB left for the cache.
  EXPECT_GT(m.weight_bytes(), 95e9);
  EXPECT_LT(m.weight_bytes(), 105e9);
  EXPECT_GT(m.kv_pool_bytes, 20e9);
  // MLA latent: (512 + 64) x 2 bytes x 61 layers per token.
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token, 576.0 * 2 * 61);
  EXPECT_DOUBLE_EQ(m.kv_block_bytes, 576.0 * 2 * 61 * 64);
  EXPECT_EQ(m.state_blocks_per_sequence, 0);
  // Hundreds of thousands of cached tokens per GPU.
  EXPECT_GT(m.num_kv_blocks * 64, 200'000);
}

TEST(MemoryLayoutTest, DeepSeekV3Fp8On8xH800DoesNotFit) {
  GpuMemoryInputs in = deepseek_ep8("h800-sxm");
  std::string error;
  GpuMemoryLayout m = compute_gpu_memory_layout(deepseek(), in, &error);
  EXPECT_EQ(m.num_kv_blocks, 0);
  EXPECT_LT(m.kv_pool_bytes, 0);
  // 80 GB = 74.51 GiB of HBM; the weights alone are 100.7 GB = 93.79 GiB.
  EXPECT_DOUBLE_EQ(m.weight_bytes(), 100'709'602'816.0);
  EXPECT_EQ(error,
            "does not fit in HBM: weights 93.79 GiB + workspace 4.00 GiB + reserve 3.73 GiB "
            "= 101.52 GiB exceed the 74.51 GiB of HBM by 27.01 GiB");
}

TEST(MemoryLayoutTest, DeepSeekV3Fp8On16xH800Fits) {
  GpuMemoryInputs in = deepseek_ep8("h800-sxm");
  in.routed_expert_slots = 16 * 58;  // EP16: 16 experts per GPU and layer
  std::string error;
  GpuMemoryLayout m = compute_gpu_memory_layout(deepseek(), in, &error);
  EXPECT_EQ(error, "");
  EXPECT_GT(m.num_kv_blocks, 0);
}

TEST(MemoryLayoutTest, RoomForLessThanOneBlockIsRefused) {
  GpuMemoryInputs in;
  in.hbm_bytes = 1'000'000'000;
  std::string error;
  GpuMemoryLayout probe = compute_gpu_memory_layout(tiny(), in, &error);
  ASSERT_EQ(error, "");
  // Leave half a block for the cache.
  in.workspace_bytes = static_cast<int64_t>(probe.kv_pool_bytes - probe.kv_block_bytes / 2);
  GpuMemoryLayout m = compute_gpu_memory_layout(tiny(), in, &error);
  EXPECT_EQ(m.num_kv_blocks, 0);
  EXPECT_NE(error.find("less than one KV block"), std::string::npos) << error;
}

TEST(MemoryLayoutTest, RoutedWeightsScaleWithSlots) {
  GpuMemoryInputs in;
  in.hbm_bytes = 141'000'000'000;
  std::string error;
  in.routed_expert_slots = 0;
  GpuMemoryLayout none = compute_gpu_memory_layout(tiny(), in, &error);
  in.routed_expert_slots = 2 * 3;
  GpuMemoryLayout two = compute_gpu_memory_layout(tiny(), in, &error);
  in.routed_expert_slots = 16 * 3;
  GpuMemoryLayout all = compute_gpu_memory_layout(tiny(), in, &error);
  // tiny: 3 x 256 x 128 BF16 weights per expert.
  const double per_expert = 3.0 * 256 * 128 * 2;
  EXPECT_DOUBLE_EQ(none.routed_expert_weight_bytes, 0.0);
  EXPECT_DOUBLE_EQ(two.routed_expert_weight_bytes, 6 * per_expert);
  EXPECT_DOUBLE_EQ(all.routed_expert_weight_bytes, 48 * per_expert);
  EXPECT_DOUBLE_EQ(none.kv_pool_bytes - all.kv_pool_bytes, 48 * per_expert);
  // Everything else is the same.
  EXPECT_DOUBLE_EQ(none.attention_weight_bytes, all.attention_weight_bytes);
  EXPECT_DOUBLE_EQ(none.shared_expert_weight_bytes, all.shared_expert_weight_bytes);
  // With every expert on the GPU, the weights are the whole model.
  EXPECT_NEAR(all.weight_bytes(), total_weight_bytes(tiny()), 1e-6 * total_weight_bytes(tiny()));
}

TEST(MemoryLayoutTest, TensorParallelAttentionSplitsWeightsAndState) {
  GpuMemoryInputs in;
  in.hbm_bytes = 141'000'000'000;
  std::string error;
  GpuMemoryLayout tp1 = compute_gpu_memory_layout(tiny(), in, &error);
  in.attention_tp = 4;
  GpuMemoryLayout tp4 = compute_gpu_memory_layout(tiny(), in, &error);
  EXPECT_DOUBLE_EQ(tp4.attention_weight_bytes, tp1.attention_weight_bytes / 4);
  // MLA's latent is shared by all heads: every rank keeps it whole.
  EXPECT_DOUBLE_EQ(tp4.kv_bytes_per_token, tp1.kv_bytes_per_token);
  // KDA state is split by heads.
  EXPECT_DOUBLE_EQ(tp4.state_bytes_per_sequence, tp1.state_bytes_per_sequence / 4);
  EXPECT_DOUBLE_EQ(tp4.dense_ffn_weight_bytes, tp1.dense_ffn_weight_bytes);
  EXPECT_DOUBLE_EQ(tp4.embedding_weight_bytes, tp1.embedding_weight_bytes);
}

TEST(MemoryLayoutTest, HybridModelReservesStateBlocks) {
  GpuMemoryInputs in;
  in.hbm_bytes = 141'000'000'000;
  in.kv_block_tokens = 16;
  std::string error;
  GpuMemoryLayout m = compute_gpu_memory_layout(tiny(), in, &error);
  ASSERT_EQ(error, "");
  // tiny: 3 MLA layers of (64 + 16) BF16 per token; one KDA layer of state.
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token, 3.0 * 80 * 2);
  EXPECT_DOUBLE_EQ(m.state_bytes_per_sequence, recurrent_state_bytes_per_sequence(tiny()));
  EXPECT_GT(m.state_bytes_per_sequence, 0);
  EXPECT_EQ(m.state_blocks_per_sequence,
            static_cast<int64_t>(std::ceil(m.state_bytes_per_sequence / m.kv_block_bytes)));
}

TEST(MemoryLayoutTest, GqaKvHeadsSplitOverTpButNotBelowOne) {
  ModelCard card = load_model_card(kModels + "mixtral-8x7b.toml");  // 8 KV heads
  GpuMemoryInputs in;
  in.hbm_bytes = 1'000'000'000'000;
  std::string error;
  GpuMemoryLayout tp1 = compute_gpu_memory_layout(card, in, &error);
  in.attention_tp = 4;
  GpuMemoryLayout tp4 = compute_gpu_memory_layout(card, in, &error);
  in.attention_tp = 16;
  GpuMemoryLayout tp16 = compute_gpu_memory_layout(card, in, &error);
  EXPECT_DOUBLE_EQ(tp4.kv_bytes_per_token, tp1.kv_bytes_per_token / 4);
  EXPECT_DOUBLE_EQ(tp16.kv_bytes_per_token, tp1.kv_bytes_per_token / 8);
}

}  // namespace
}  // namespace moesim::sim
