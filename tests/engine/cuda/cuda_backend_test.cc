// Every CUDA backend operation against the CPU reference backend on the same synthetic inputs,
// with tolerances scaled by dtype (BF16 ~1e-2 relative, FP8 ~1e-1). Skips without a device.
#include <gtest/gtest.h>

#include <vector>

#include "tests/engine/cuda/cuda_test_util.h"

namespace moesim::engine::cuda::testing {
namespace {

using CudaBackendTest = CudaVsCpuTest;

TEST_F(CudaBackendTest, RmsNorm) {
  const Pair x = random(DType::kBF16, {37, 320}, 2.0f);
  const Pair w = random(DType::kBF16, {320});
  const Pair out = zeros(DType::kBF16, {37, 320});
  cpu_->rmsnorm(x.cpu, w.cpu, 1e-6f, out.cpu);
  gpu_->rmsnorm(x.gpu, w.gpu, 1e-6f, out.gpu);
  EXPECT_LT(diff(out), kBf16Tolerance);
}

void run_router(CudaBackendTest& t, ScoringFunc scoring, bool with_bias, int64_t experts = 64,
                int64_t top_k = 6, bool normalize = true) {
  const int64_t tokens = 50, hidden = 128;
  const auto x = t.random(DType::kBF16, {tokens, hidden}, 1.0f);
  const auto w_gate = t.random(DType::kBF16, {hidden, experts}, 0.2f);
  const auto bias = t.random(DType::kF32, {experts}, 0.05f);
  const auto ids = t.ints({tokens, top_k}, std::vector<int32_t>(tokens * top_k, -1));
  const auto weights = t.zeros(DType::kF32, {tokens, top_k});
  RouterConfig config{experts, top_k, scoring, normalize, 2.5f};
  t.cpu_->router(x.cpu, RouterWeights{w_gate.cpu, with_bias ? bias.cpu : Tensor{}}, config, ids.cpu,
                 weights.cpu);
  t.gpu_->router(x.gpu, RouterWeights{w_gate.gpu, with_bias ? bias.gpu : Tensor{}}, config, ids.gpu,
                 weights.gpu);
  t.gpu_->synchronize();
  const std::vector<int32_t> cpu_ids = download_ints(*t.cpu_, ids.cpu);
  const std::vector<int32_t> gpu_ids = download_ints(*t.gpu_, ids.gpu);
  int same = 0;
  for (size_t i = 0; i < cpu_ids.size(); ++i) same += cpu_ids[i] == gpu_ids[i];
  // Near-ties may order differently after different GEMM summation orders; allow a few.
  EXPECT_GE(same, static_cast<int>(cpu_ids.size()) * 97 / 100);
  if (same == static_cast<int>(cpu_ids.size())) {
    EXPECT_LT(t.diff(weights), kBf16Tolerance);
  }
}

TEST_F(CudaBackendTest, RouterSoftmax) { run_router(*this, ScoringFunc::kSoftmax, false); }
TEST_F(CudaBackendTest, RouterSigmoidWithBias) { run_router(*this, ScoringFunc::kSigmoid, true); }
// The replay's output head: 1024-column tiles (the kernel's widest), top-1, no renormalisation.
TEST_F(CudaBackendTest, RouterOutputHeadTile) {
  run_router(*this, ScoringFunc::kSoftmax, false, 1024, 1, false);
}

// Widths 72 (16-byte vector copies) and 70 (the element-wise fallback).
TEST_F(CudaBackendTest, PermuteAndUnpermuteAreExact) {
  for (const int64_t width : {72, 70}) {
    const Pair x = random(DType::kBF16, {10, width});
    const Pair gather = ints({12}, {3, 0, 9, 9, 1, 2, 5, 4, 7, 6, 8, 0});
    const Pair permuted = zeros(DType::kBF16, {12, width});
    cpu_->permute(x.cpu, gather.cpu, permuted.cpu);
    gpu_->permute(x.gpu, gather.gpu, permuted.gpu);
    EXPECT_EQ(diff(permuted), 0.0) << "width " << width;
    const Pair scatter = ints({12}, {11, 0, 5, 3, 2, 1, 4, 6, 10, 7, 9, 8});
    const Pair back = zeros(DType::kBF16, {12, width});
    cpu_->unpermute(permuted.cpu, scatter.cpu, back.cpu);
    gpu_->unpermute(permuted.gpu, scatter.gpu, back.gpu);
    EXPECT_EQ(diff(back), 0.0) << "width " << width;
  }
}

TEST_F(CudaBackendTest, WeightedCombineWithAndWithoutShared) {
  const Pair expert_out = random(DType::kBF16, {9, 4, 96});
  const Pair weights = random(DType::kF32, {9, 4});
  const Pair shared = random(DType::kBF16, {9, 96});
  const Pair out = zeros(DType::kBF16, {9, 96});
  cpu_->weighted_combine(expert_out.cpu, weights.cpu, shared.cpu, out.cpu);
  gpu_->weighted_combine(expert_out.gpu, weights.gpu, shared.gpu, out.gpu);
  EXPECT_LT(diff(out), kBf16Tolerance);
  cpu_->weighted_combine(expert_out.cpu, weights.cpu, Tensor{}, out.cpu);
  gpu_->weighted_combine(expert_out.gpu, weights.gpu, Tensor{}, out.gpu);
  EXPECT_LT(diff(out), kBf16Tolerance);
}

void run_expert_ffn(CudaBackendTest& t, DType weight_dtype, double tolerance) {
  if (!t.gpu_->supports_expert_dtype(weight_dtype)) {
    GTEST_SKIP() << "device has no FP8 tensor cores";
  }
  const int64_t experts = 5, hidden = 128, inter = 64;
  const std::vector<int64_t> counts = {7, 0, 33, 1, 16};
  int64_t rows = 0;
  for (int64_t c : counts) rows += c;
  const auto x = t.random(DType::kBF16, {rows, hidden}, 1.0f);
  const auto gate_up = t.random(weight_dtype, {experts, hidden, 2 * inter}, 0.5f);
  const auto down = t.random(weight_dtype, {experts, inter, hidden}, 0.5f);
  const auto gate_up_scale = t.from(DType::kF32, {experts}, {0.2f, 0.1f, 0.15f, 0.3f, 0.05f});
  const auto down_scale = t.from(DType::kF32, {experts}, {0.1f, 0.2f, 0.12f, 0.08f, 0.25f});
  const auto out = t.zeros(DType::kBF16, {rows, hidden});
  const bool fp8 = weight_dtype == DType::kFP8E4M3;
  auto weights = [&](bool gpu) {
    return FfnWeights{experts,
                      hidden,
                      inter,
                      gpu ? gate_up.gpu : gate_up.cpu,
                      gpu ? down.gpu : down.cpu,
                      fp8 ? (gpu ? gate_up_scale.gpu : gate_up_scale.cpu) : Tensor{},
                      fp8 ? (gpu ? down_scale.gpu : down_scale.cpu) : Tensor{}};
  };
  t.cpu_->expert_ffn(x.cpu, counts, weights(false), out.cpu);
  t.gpu_->expert_ffn(x.gpu, counts, weights(true), out.gpu);
  EXPECT_LT(t.diff(out), tolerance);
}

TEST_F(CudaBackendTest, ExpertFfnBf16Grouped) {
  run_expert_ffn(*this, DType::kBF16, kBf16Tolerance);
}
TEST_F(CudaBackendTest, ExpertFfnFp8) { run_expert_ffn(*this, DType::kFP8E4M3, kFp8Tolerance); }

// A batch with a chunked-prefill sequence, a fresh prefill longer than one tile, and decodes.
AttentionBatch mixed_batch() { return AttentionBatch{{40, 1, 70, 1}, {25, 300, 0, 47}}; }
AttentionBatch decode_batch() { return AttentionBatch{{1, 1, 1}, {0, 1500, 77}}; }

void run_gqa(CudaBackendTest& t, const AttentionBatch& batch, bool qk_norm) {
  const int64_t hidden = 128, heads = 8, kv_heads = 2, d = 64;
  const int64_t tokens = batch.total_new_tokens();
  const int64_t rows = batch.total_cache_rows();
  const auto x = t.random(DType::kBF16, {tokens, hidden}, 1.0f);
  const auto w_q = t.random(DType::kBF16, {hidden, heads * d}, 0.1f);
  const auto w_k = t.random(DType::kBF16, {hidden, kv_heads * d}, 0.1f);
  const auto w_v = t.random(DType::kBF16, {hidden, kv_heads * d}, 0.1f);
  const auto w_o = t.random(DType::kBF16, {heads * d, hidden}, 0.1f);
  const auto q_norm = t.random(DType::kBF16, {d}, 1.0f);
  const auto k_norm = t.random(DType::kBF16, {d}, 1.0f);
  const auto k_cache = t.random(DType::kBF16, {rows, kv_heads * d}, 1.0f);
  const auto v_cache = t.random(DType::kBF16, {rows, kv_heads * d}, 1.0f);
  const auto out = t.zeros(DType::kBF16, {tokens, hidden});
  const GqaShape shape{hidden, heads, kv_heads, d, qk_norm};
  t.cpu_->gqa_attention(
      GqaWeights{shape, w_q.cpu, w_k.cpu, w_v.cpu, w_o.cpu, q_norm.cpu, k_norm.cpu}, batch, x.cpu,
      k_cache.cpu, v_cache.cpu, out.cpu);
  t.gpu_->gqa_attention(
      GqaWeights{shape, w_q.gpu, w_k.gpu, w_v.gpu, w_o.gpu, q_norm.gpu, k_norm.gpu}, batch, x.gpu,
      k_cache.gpu, v_cache.gpu, out.gpu);
  EXPECT_LT(t.diff(out), kBf16Tolerance);
  EXPECT_LT(t.diff(k_cache), kBf16Tolerance);
}

TEST_F(CudaBackendTest, GqaPrefillMixedBatch) { run_gqa(*this, mixed_batch(), false); }
TEST_F(CudaBackendTest, GqaDecodeSplitK) { run_gqa(*this, decode_batch(), true); }

void run_mla(CudaBackendTest& t, const AttentionBatch& batch, MlaForm form, int64_t heads) {
  const int64_t hidden = 128, q_lora = 96, lora = 64, nope = 32, rope = 16, v = 32;
  const int64_t tokens = batch.total_new_tokens();
  const int64_t rows = batch.total_cache_rows();
  const auto x = t.random(DType::kBF16, {tokens, hidden}, 1.0f);
  const auto w_q_a = t.random(DType::kBF16, {hidden, q_lora}, 0.1f);
  const auto q_a_norm = t.random(DType::kBF16, {q_lora}, 1.0f);
  const auto w_q_b = t.random(DType::kBF16, {q_lora, heads * (nope + rope)}, 0.1f);
  const auto w_kv_a = t.random(DType::kBF16, {hidden, lora + rope}, 0.1f);
  const auto kv_a_norm = t.random(DType::kBF16, {lora}, 1.0f);
  const auto w_kv_b = t.random(DType::kBF16, {lora, heads * (nope + v)}, 0.15f);
  const auto w_o = t.random(DType::kBF16, {heads * v, hidden}, 0.1f);
  const auto cache = t.random(DType::kBF16, {rows, lora + rope}, 1.0f);
  const auto out = t.zeros(DType::kBF16, {tokens, hidden});
  const MlaShape shape{hidden, heads, q_lora, lora, nope, rope, v};
  t.cpu_->mla_attention(MlaWeights{shape, w_q_a.cpu, q_a_norm.cpu, w_q_b.cpu, w_kv_a.cpu,
                                   kv_a_norm.cpu, w_kv_b.cpu, w_o.cpu},
                        batch, form, x.cpu, cache.cpu, out.cpu);
  t.gpu_->mla_attention(MlaWeights{shape, w_q_a.gpu, q_a_norm.gpu, w_q_b.gpu, w_kv_a.gpu,
                                   kv_a_norm.gpu, w_kv_b.gpu, w_o.gpu},
                        batch, form, x.gpu, cache.gpu, out.gpu);
  EXPECT_LT(t.diff(out), kBf16Tolerance);
  EXPECT_LT(t.diff(cache), kBf16Tolerance);
}

TEST_F(CudaBackendTest, MlaNaivePrefill) { run_mla(*this, mixed_batch(), MlaForm::kNaive, 8); }
TEST_F(CudaBackendTest, MlaAbsorbedDecode) {
  run_mla(*this, decode_batch(), MlaForm::kAbsorbed, 20);
}
TEST_F(CudaBackendTest, MlaAbsorbedMultiTokenIsCausal) {
  run_mla(*this, mixed_batch(), MlaForm::kAbsorbed, 8);
}

void run_kda(CudaBackendTest& t, const AttentionBatch& batch) {
  const int64_t hidden = 128, heads = 4, dk = 64, dv = 32, taps = 4, r = 16;
  const int64_t tokens = batch.total_new_tokens();
  const int64_t seqs = batch.num_sequences();
  const int64_t channels = heads * (2 * dk + dv);
  const auto x = t.random(DType::kBF16, {tokens, hidden}, 1.0f);
  auto mat = [&](int64_t in, int64_t out_dim, float s) {
    return t.random(DType::kBF16, {in, out_dim}, s);
  };
  const auto w_q = mat(hidden, heads * dk, 0.1f), w_k = mat(hidden, heads * dk, 0.1f),
             w_v = mat(hidden, heads * dv, 0.1f);
  const auto conv_q = mat(taps, heads * dk, 0.5f), conv_k = mat(taps, heads * dk, 0.5f),
             conv_v = mat(taps, heads * dv, 0.5f);
  const auto w_f_a = mat(hidden, r, 0.1f), w_f_b = mat(r, heads * dk, 0.3f);
  const auto w_beta = mat(hidden, heads, 0.1f);
  const auto w_g_a = mat(hidden, r, 0.1f), w_g_b = mat(r, heads * dv, 0.3f);
  const auto a_log = t.random(DType::kF32, {heads}, 1.0f);
  const auto dt_bias = t.random(DType::kF32, {heads * dk}, 1.0f);
  const auto o_norm = t.random(DType::kBF16, {dv}, 1.0f);
  const auto w_o = mat(heads * dv, hidden, 0.1f);
  const auto recurrent = t.random(DType::kF32, {seqs, heads, dk, dv}, 0.3f);
  const auto conv_state = t.random(DType::kF32, {seqs, taps - 1, channels}, 0.3f);
  const auto out = t.zeros(DType::kBF16, {tokens, hidden});
  const KdaShape shape{hidden, heads, dk, dv, taps, r, true};
  auto weights = [&](bool g) {
    auto pick = [g](const CudaVsCpuTest::Pair& p) { return g ? p.gpu : p.cpu; };
    return KdaWeights{shape,        pick(w_q),     pick(w_k),    pick(w_v),
                      pick(conv_q), pick(conv_k),  pick(conv_v), pick(w_f_a),
                      pick(w_f_b),  pick(w_beta),  pick(w_g_a),  pick(w_g_b),
                      pick(a_log),  pick(dt_bias), pick(o_norm), pick(w_o)};
  };
  t.cpu_->kda_attention(weights(false), batch, x.cpu, KdaState{recurrent.cpu, conv_state.cpu},
                        out.cpu);
  t.gpu_->kda_attention(weights(true), batch, x.gpu, KdaState{recurrent.gpu, conv_state.gpu},
                        out.gpu);
  EXPECT_LT(t.diff(out), kBf16Tolerance);
  EXPECT_LT(t.diff(recurrent), kBf16Tolerance);
  EXPECT_LT(t.diff(conv_state), kBf16Tolerance);
}

TEST_F(CudaBackendTest, KdaChunkedPrefill) {
  run_kda(*this, AttentionBatch{{70, 5, 33}, {0, 12, 3}});
}
TEST_F(CudaBackendTest, KdaRecurrentDecode) { run_kda(*this, AttentionBatch{{1, 1}, {9, 0}}); }

TEST_F(CudaBackendTest, OutOfMemoryIsAnErrorNotACrash) {
  const int64_t too_many = gpu_->memory_info().capacity_bytes;  // elements of 2 bytes: 2x
  EXPECT_THROW(gpu_->allocate(DType::kBF16, {too_many}, "oversized test tensor"), OutOfMemoryError);
  // The backend still works afterwards.
  const Pair x = random(DType::kBF16, {4, 64});
  EXPECT_EQ(diff(x), 0.0);
}

TEST_F(CudaBackendTest, DeviceDescription) {
  EXPECT_EQ(gpu_->name(), "cuda");
  EXPECT_FALSE(gpu_->device_name().empty());
  EXPECT_GT(gpu_->memory_info().capacity_bytes, 0);
  auto timer = gpu_->make_timer();
  timer->start();
  timer->stop();
  EXPECT_GE(timer->elapsed_ns(), 0);
  EXPECT_FALSE(gpu_->all_to_all(Tensor{}, {0}, Tensor{}, {0}));  // single rank
}

}  // namespace
}  // namespace moesim::engine::cuda::testing
