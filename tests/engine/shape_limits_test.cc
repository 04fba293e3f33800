// Shapes the CUDA kernels cannot run are refused before a replay starts, naming the trace field;
// the CPU reference runs any shape.
#include "engine/shape_limits.h"

#include <gtest/gtest.h>

namespace moesim::engine {
namespace {

TraceLayer mla_moe_layer() {
  TraceLayer l;
  l.attention_kind = AttentionKind::kMla;
  l.mla.num_heads = 128;
  l.mla.kv_lora_rank = 512;
  l.mla.qk_nope_head_dim = 128;
  l.mla.qk_rope_head_dim = 64;
  l.mla.v_head_dim = 128;
  l.is_moe = true;
  l.num_routed_experts = 256;
  l.top_k = 8;
  return l;
}

TEST(ShapeLimitsTest, DeepSeekV3ShapesFitTheCudaKernels) {
  TraceModel m;
  m.layers = {mla_moe_layer(), mla_moe_layer()};
  EXPECT_TRUE(shape_limit_violations(m, "cuda", ReplayDtypes{}).empty());
}

TEST(ShapeLimitsTest, OutOfRangeShapesAreNamedForCudaOnly) {
  TraceModel m;
  TraceLayer mla = mla_moe_layer();
  mla.mla.kv_lora_rank = 520;  // over 512 and not a multiple of 16
  mla.num_routed_experts = 2048;
  TraceLayer kda;
  kda.attention_kind = AttentionKind::kKda;
  kda.kda.head_dim_k = 192;
  kda.kda.head_dim_v = 128;
  kda.kda.short_conv_kernel = 4;
  m.layers = {mla, kda};
  const std::vector<std::string> v = shape_limit_violations(m, "cuda", ReplayDtypes{});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0],
            "model.layers[0].attention.kv_lora_rank: 520 exceeds the CUDA kernels' limit of 512");
  EXPECT_EQ(v[1],
            "model.layers[0].attention.kv_lora_rank: 520 is not a multiple of 16 (the CUDA "
            "kernels' tile)");
  EXPECT_EQ(v[2],
            "model.layers[0].ffn.num_routed_experts: 2048 exceeds the CUDA kernels' limit of 1024");
  EXPECT_EQ(v[3],
            "model.layers[1].attention.head_dim_k: 192 exceeds the CUDA kernels' limit of 128");
  EXPECT_TRUE(shape_limit_violations(m, "cpu", ReplayDtypes{}).empty());
}

TEST(ShapeLimitsTest, DtypesTheCudaKernelsDoNotRunAreNamed) {
  TraceModel m;
  m.hidden_size = 7168;
  TraceLayer moe = mla_moe_layer();
  moe.expert_intermediate_size = 2050;  // not a multiple of 16
  m.layers = {moe};
  m.dtypes.attention = "fp32";
  m.dtypes.experts = "mxfp4";  // replayed as FP8
  const std::vector<std::string> v = shape_limit_violations(m, "cuda", replay_dtypes(m.dtypes, ""));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], "model.dtypes.attention: fp32: the CUDA kernels run BF16 attention weights");
  EXPECT_EQ(v[1],
            "model.layers[0].ffn.expert_intermediate_size: 2050 is not a multiple of 16 (FP8 "
            "expert GEMMs need widths in multiples of 16)");
  // Replayed in BF16 (--expert-dtype bf16), the widths are free.
  m.dtypes.attention = "bf16";
  EXPECT_TRUE(shape_limit_violations(m, "cuda", replay_dtypes(m.dtypes, "bf16")).empty());
  EXPECT_TRUE(shape_limit_violations(m, "cpu", replay_dtypes(m.dtypes, "")).empty());
}

}  // namespace
}  // namespace moesim::engine
