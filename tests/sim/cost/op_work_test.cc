// Op-kind names are shared with the engine's measurement schema: they must round-trip. The op
// formulas (sim/cost/op_formulas.h) on hand-counted small shapes; their agreement with the engine
// is op_work_parity_test.cc's.
#include "sim/cost/op_work.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "sim/cost/op_formulas.h"

namespace moesim::sim {
namespace {

TEST(OpWorkTest, NamesRoundTripAndAreDistinct) {
  std::set<std::string> names;
  for (int i = 0; i < kNumOpKinds; ++i) {
    OpKind k = static_cast<OpKind>(i);
    std::string name(op_kind_name(k));
    EXPECT_FALSE(name.empty());
    names.insert(name);
    ASSERT_TRUE(op_kind_from_name(name).has_value()) << name;
    EXPECT_EQ(*op_kind_from_name(name), k);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumOpKinds));
  EXPECT_EQ(op_kind_name(OpKind::kCombineA2a), "combine_a2a");
  EXPECT_EQ(op_kind_name(OpKind::kExpertFfn), "expert_ffn");
}

TEST(OpWorkTest, UnknownNameIsNullopt) {
  EXPECT_FALSE(op_kind_from_name("attn_mla").has_value());
  EXPECT_FALSE(op_kind_from_name("").has_value());
  EXPECT_FALSE(op_kind_from_name("Expert_FFN").has_value());
}

TEST(OpWorkTest, EmptyMeansNoTokensFlopsOrBytes) {
  OpWork w;
  EXPECT_TRUE(w.empty());
  w.bytes = 1;
  EXPECT_FALSE(w.empty());
}

// ---- Op formulas -------------------------------------------------------------------------------

AttentionSpec small_gqa() {
  AttentionSpec a;
  a.kind = AttentionKind::kGQA;
  a.gqa = {2, 1, 4, false};  // heads, kv heads, head_dim, qk_norm
  return a;
}

AttentionSpec small_mla() {
  AttentionSpec a;
  a.kind = AttentionKind::kMLA;
  a.mla = {2, 0, 4, 2, 1, 2};  // heads, q_lora, kv_lora, nope, rope, v
  return a;
}

AttentionSpec small_kda() {
  AttentionSpec a;
  a.kind = AttentionKind::kKDA;
  a.kda = {1, 2, 2, 2, 1, false};  // heads, dk, dv, conv taps, gate rank, output gate
  return a;
}

TEST(OpFormulasTest, RmsNormIsOneNorm) {
  const OpWork w = rmsnorm_work(3, 8, DType::kFP8);
  EXPECT_EQ(w.kind, OpKind::kRmsNorm);
  EXPECT_EQ(w.dtype, DType::kFP8);
  EXPECT_EQ(w.flops, 96.0);  // 4 T H
  EXPECT_EQ(w.bytes, 96.0);  // 4 T H: BF16 rows in and out
  EXPECT_EQ(w.tokens, 3);
}

TEST(OpFormulasTest, AttentionKindsAndEmptyParts) {
  const Precision p;
  const std::vector<SeqSlice> none;
  const std::vector<SeqSlice> decode_only = {{1, 10, false}};
  const std::pair<AttentionSpec, OpKind> kinds[] = {{small_mla(), OpKind::kAttnMlaPrefill},
                                                    {small_gqa(), OpKind::kAttnGqaPrefill},
                                                    {small_kda(), OpKind::kAttnKdaPrefill}};
  for (const auto& [spec, prefill_kind] : kinds) {
    const AttentionWork empty = attention_work(spec, 8, p, 1, none);
    EXPECT_TRUE(empty.prefill.empty());
    EXPECT_TRUE(empty.decode.empty());
    EXPECT_EQ(empty.prefill.kind, prefill_kind);
    EXPECT_EQ(empty.decode.kind, static_cast<OpKind>(static_cast<int>(prefill_kind) + 1));
    const AttentionWork decode = attention_work(spec, 8, p, 1, decode_only);
    EXPECT_TRUE(decode.prefill.empty());
    EXPECT_EQ(decode.decode.tokens, 1);
    EXPECT_GT(decode.decode.bytes, 0.0);
  }
}

TEST(OpFormulasTest, GqaHandCounted) {
  // hidden 8, 2 heads, 1 KV head of 4: projection weights 8*2*4*2 + 8*1*4*2 = 192 (384 FLOPs
  // per token), cache 2*1*4 BF16 = 16 bytes per token, activations 4*8 = 32 bytes per token.
  Precision p;
  const std::vector<SeqSlice> seqs = {{3, 2, true}, {1, 5, false}};
  const AttentionWork w = attention_work(small_gqa(), 8, p, 1, seqs);
  // Prefill: mean context 2 + (3 + 1) / 2 = 4, core 4 * 2 * 4 * 4 = 128 per token.
  EXPECT_EQ(w.prefill.flops, 3.0 * (384.0 + 128.0));
  EXPECT_EQ(w.prefill.bytes, 16.0 * (2 + 6) + 3.0 * 32.0 + 192.0 * 2.0);
  EXPECT_EQ(w.prefill.tokens, 3);
  EXPECT_EQ(w.prefill.dtype, DType::kBF16);
  // Decode: context 5 + 1, core 4 * 2 * 4 * 6 = 192.
  EXPECT_EQ(w.decode.flops, 384.0 + 192.0);
  EXPECT_EQ(w.decode.bytes, 16.0 * 7 + 32.0 + 384.0);
  // The core's share: its FLOPs and the cache bytes, at precision.core_attention.
  EXPECT_EQ(w.prefill.core_flops, 3.0 * 128.0);
  EXPECT_EQ(w.prefill.core_bytes, 16.0 * 8);
  EXPECT_EQ(w.decode.core_flops, 192.0);
  EXPECT_EQ(w.decode.core_bytes, 16.0 * 7);
  EXPECT_EQ(w.decode.core_dtype, DType::kBF16);
  EXPECT_EQ(w.decode.hidden, 8);
  // (query, key) pairs: 3 queries x mean context 4; 1 query x 6. Not divided by tp.
  EXPECT_EQ(w.prefill.attended_pairs, 12.0);
  EXPECT_EQ(w.decode.attended_pairs, 6.0);
  EXPECT_EQ(attention_work(small_gqa(), 8, p, 2, seqs).prefill.attended_pairs, 12.0);
  Precision fp8 = p;
  fp8.attention = DType::kFP8;
  fp8.core_attention = DType::kFP8;
  const AttentionWork w8 = attention_work(small_gqa(), 8, fp8, 1, seqs);
  EXPECT_EQ(w8.decode.dtype, DType::kFP8);
  EXPECT_EQ(w8.decode.core_dtype, DType::kFP8);
  // FP8 projection weights: 192 bytes instead of 384.
  EXPECT_EQ(w8.decode.bytes, 16.0 * 7 + 32.0 + 192.0);
  // TP 2: FLOPs and weights halved; the cache is split over min(tp, KV heads) = 1 and then
  // divided by tp with the rest of the part's bytes.
  const AttentionWork tp2 = attention_work(small_gqa(), 8, p, 2, seqs);
  EXPECT_EQ(tp2.prefill.flops, w.prefill.flops / 2.0);
  EXPECT_EQ(tp2.prefill.bytes, (16.0 * 8 + 3.0 * 32.0) / 2.0 + 384.0 / 2.0);
}

TEST(OpFormulasTest, MlaPrefillUpProjectsTheCachedRows) {
  // Per cached row: the core attends it (2 H (nope + rope + v) = 20 FLOPs) and the naive form
  // up-projects it (2 lora H (nope + v) = 64 FLOPs).
  const Precision p;
  const std::vector<SeqSlice> cold = {{1, 0, true}};
  const std::vector<SeqSlice> warm = {{1, 10, true}};
  const double diff = attention_work(small_mla(), 8, p, 1, warm).prefill.flops -
                      attention_work(small_mla(), 8, p, 1, cold).prefill.flops;
  EXPECT_EQ(diff, 10.0 * (20.0 + 64.0));
}

TEST(OpFormulasTest, KdaIsConstantInContextAndCountsStatePerSequence) {
  Precision p;
  p.recurrent_state = DType::kFP32;
  const AttentionSpec a = small_kda();
  const AttentionWork short_ctx = attention_work(a, 4, p, 1, std::vector<SeqSlice>{{1, 0, false}});
  const AttentionWork long_ctx =
      attention_work(a, 4, p, 1, std::vector<SeqSlice>{{1, 100000, false}});
  EXPECT_EQ(short_ctx.decode.flops, long_ctx.decode.flops);
  EXPECT_EQ(short_ctx.decode.bytes, long_ctx.decode.bytes);
  // State 1*2*2 + conv (2 - 1) * (2*1*2 + 1*2) = 10 FP32 values, read and written: 80 bytes; the
  // token's activations 16 bytes.
  const AttentionWork two =
      attention_work(a, 4, p, 1, std::vector<SeqSlice>{{1, 0, false}, {1, 7, false}});
  EXPECT_EQ(two.decode.bytes - short_ctx.decode.bytes, 80.0 + 16.0);
}

TEST(OpFormulasTest, AllReduceBytes) {
  EXPECT_EQ(attention_allreduce_bytes(3, 4, 1), 0.0);
  EXPECT_EQ(attention_allreduce_bytes(3, 4, 2), 24.0);  // 2 (tp - 1) / tp T H 2
  EXPECT_EQ(attention_allreduce_bytes(3, 4, 4), 36.0);
}

TEST(OpFormulasTest, DenseFfnShardedOverTp) {
  const OpWork w = dense_ffn_work(5, 4, 6, 2, DType::kBF16);  // 3 * 4 * 6 = 72 weights
  EXPECT_EQ(w.kind, OpKind::kDenseFfn);
  EXPECT_EQ(w.flops, 5.0 * 2.0 * 72.0 / 2.0);
  EXPECT_EQ(w.bytes, 72.0 * 2.0 / 2.0 + 5.0 * 4.0 * 4.0);
  EXPECT_EQ(w.tokens, 5);
}

MoeSpec small_moe() {
  MoeSpec m;
  m.num_routed_experts = 8;
  m.top_k = 2;
  m.num_shared_experts = 2;
  m.expert_intermediate_size = 6;
  m.shared_intermediate_size = 3;
  return m;
}

TEST(OpFormulasTest, RouterAndPermute) {
  const OpWork r = router_work(small_moe(), 4, 3, DType::kFP8);
  EXPECT_EQ(r.kind, OpKind::kRouter);
  EXPECT_EQ(r.dtype, DType::kFP8);
  EXPECT_EQ(r.flops, 3.0 * 2.0 * 4.0 * 8.0);
  EXPECT_EQ(r.bytes, 4.0 * 8.0 * 2.0 + 3.0 * 4.0 * 2.0);  // BF16 score weights, rows read
  const OpWork p = permute_work(3, 2, 4);
  EXPECT_EQ(p.kind, OpKind::kPermute);
  EXPECT_EQ(p.flops, 0.0);
  EXPECT_EQ(p.bytes, 3.0 * 2.0 * 4.0 * 4.0);
  EXPECT_EQ(p.tokens, 6);
}

TEST(OpFormulasTest, ExpectedActiveExperts) {
  EXPECT_EQ(expected_active_experts(0.0, 16), 0.0);
  EXPECT_NEAR(expected_active_experts(1.0, 16), 1.0, 1e-12);
  EXPECT_NEAR(expected_active_experts(1e6, 16), 16.0, 1e-9);
  EXPECT_EQ(expected_active_experts(5.0, 1), 1.0);
  EXPECT_EQ(expected_active_experts(7.0, 16),
            expected_active_experts(7.0, 16, std::log1p(-1.0 / 16)));
  EXPECT_NEAR(expected_active_experts(2.0, 4), 4.0 * (1.0 - 0.75 * 0.75), 1e-12);
}

TEST(OpFormulasTest, ExpertFfnFromSelectionsAndActiveExperts) {
  // One expert: 3 * 4 * 6 = 72 weights (144 FLOPs per token, 144 BF16 bytes).
  const OpWork w = expert_ffn_work(small_moe(), 4, DType::kBF16, 10, 2.5);
  EXPECT_EQ(w.kind, OpKind::kExpertFfn);
  EXPECT_EQ(w.flops, 10.0 * 144.0);
  EXPECT_EQ(w.bytes, 2.5 * 144.0 + 10.0 * 4.0 * 4.0);
  EXPECT_EQ(w.tokens, 10);
  EXPECT_EQ(w.num_experts, 3);  // ceil of the expectation
  const OpWork fp4 = expert_ffn_work(small_moe(), 4, DType::kMXFP4, 10, 2.0);
  EXPECT_EQ(fp4.bytes, 2.0 * 72.0 * 4.25 / 8.0 + 10.0 * 4.0 * 4.0);
}

TEST(OpFormulasTest, SharedExpertCombineAndLmHead) {
  const OpWork sh = shared_expert_work(small_moe(), 4, 5, DType::kBF16);  // 3 * 4 * 3 * 2 = 72
  EXPECT_EQ(sh.kind, OpKind::kSharedExpert);
  EXPECT_EQ(sh.flops, 5.0 * 2.0 * 72.0);
  EXPECT_EQ(sh.bytes, 72.0 * 2.0 + 5.0 * 4.0 * 4.0);
  const OpWork c = combine_work(3, 2, false, 4);
  EXPECT_EQ(c.kind, OpKind::kCombine);
  EXPECT_EQ(c.flops, 3.0 * 2.0 * 4.0 * 2.0);
  EXPECT_EQ(c.bytes, (6.0 + 3.0) * 4.0 * 2.0 + 4.0 * 6.0);
  EXPECT_EQ(combine_work(3, 2, true, 4).bytes, (6.0 + 6.0) * 4.0 * 2.0 + 4.0 * 6.0);
  EXPECT_EQ(c.tokens, 3);
  const OpWork h = lm_head_work(3, 4, 10, 2, DType::kBF16);
  EXPECT_EQ(h.kind, OpKind::kLmHead);
  EXPECT_EQ(h.flops, 3.0 * 2.0 * 40.0 / 2.0);
  EXPECT_EQ(h.bytes, 40.0 * 2.0 / 2.0);
  EXPECT_EQ(h.tokens, 3);
}

}  // namespace
}  // namespace moesim::sim
