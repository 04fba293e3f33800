// MLA reference: the absorbed and naive forms agree; chunked prefill over the cache equals
// one-shot prefill; a decode step equals the last row of a longer prefill.
#include <gtest/gtest.h>

#include "../test_util.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine {
namespace {

MlaWeights make_mla(testing::TensorPool& pool, const MlaShape& s) {
  MlaWeights w;
  w.shape = s;
  const int64_t qk = s.qk_nope_head_dim + s.qk_rope_head_dim;
  if (s.q_lora_rank > 0) {
    w.w_q_a = pool.random(DType::kBF16, {s.hidden_size, s.q_lora_rank}, 0.2f);
    w.q_a_norm = pool.random(DType::kBF16, {s.q_lora_rank}, 1.0f);
  }
  w.w_q_b = pool.random(
      DType::kBF16, {s.q_lora_rank > 0 ? s.q_lora_rank : s.hidden_size, s.num_heads * qk}, 0.2f);
  w.w_kv_a = pool.random(DType::kBF16, {s.hidden_size, s.kv_lora_rank + s.qk_rope_head_dim}, 0.2f);
  w.kv_a_norm = pool.random(DType::kBF16, {s.kv_lora_rank}, 1.0f);
  w.w_kv_b = pool.random(DType::kBF16,
                         {s.kv_lora_rank, s.num_heads * (s.qk_nope_head_dim + s.v_head_dim)}, 0.2f);
  w.w_o = pool.random(DType::kBF16, {s.num_heads * s.v_head_dim, s.hidden_size}, 0.2f);
  return w;
}

class MlaTest : public ::testing::TestWithParam<int64_t> {
 protected:
  MlaShape shape() const {
    return MlaShape{.hidden_size = 32,
                    .num_heads = 3,
                    .q_lora_rank = GetParam(),
                    .kv_lora_rank = 16,
                    .qk_nope_head_dim = 8,
                    .qk_rope_head_dim = 4,
                    .v_head_dim = 6};
  }
  std::unique_ptr<Backend> backend_ = cpu::make_cpu_backend({});
  testing::TensorPool pool_{*backend_};
};

TEST_P(MlaTest, AbsorbedEqualsNaive) {
  const MlaShape s = shape();
  const MlaWeights w = make_mla(pool_, s);
  // Two sequences: a prefill chunk of 5 after 3 cached tokens, and a decode after 7.
  const AttentionBatch batch{{5, 1}, {3, 7}};
  const Tensor x = pool_.random(DType::kF32, {6, s.hidden_size});
  const Tensor cache = pool_.random(DType::kF32, {batch.total_cache_rows(), 20});
  const Tensor out_naive = pool_.zeros(DType::kF32, {6, s.hidden_size});
  const Tensor out_absorbed = pool_.zeros(DType::kF32, {6, s.hidden_size});
  cpu::mla_attention(w, batch, MlaForm::kNaive, x, cache, out_naive);
  cpu::mla_attention(w, batch, MlaForm::kAbsorbed, x, cache, out_absorbed);
  const std::vector<float> a = pool_.read(out_naive);
  EXPECT_LT(testing::max_rel_diff(pool_.read(out_absorbed), a), 1e-5);
  double norm = 0;
  for (float v : a) norm += std::fabs(v);
  EXPECT_GT(norm, 1e-3);  // not trivially zero
}

TEST_P(MlaTest, ChunkedPrefillEqualsOneShot) {
  const MlaShape s = shape();
  const MlaWeights w = make_mla(pool_, s);
  const Tensor x = pool_.random(DType::kF32, {7, s.hidden_size});
  const Tensor cache_one = pool_.zeros(DType::kF32, {7, 20});
  const Tensor out_one = pool_.zeros(DType::kF32, {7, s.hidden_size});
  cpu::mla_attention(w, AttentionBatch{{7}, {0}}, MlaForm::kNaive, x, cache_one, out_one);
  // The same 7 tokens as 4 + 3: the second chunk sees the first through the cache.
  const Tensor cache_chunked = pool_.zeros(DType::kF32, {7, 20});
  const Tensor out_a = pool_.zeros(DType::kF32, {4, s.hidden_size});
  const Tensor out_b = pool_.zeros(DType::kF32, {3, s.hidden_size});
  const Tensor x_a{x.data, DType::kF32, {4, s.hidden_size}};
  const Tensor x_b{
      static_cast<float*>(x.data) + 4 * s.hidden_size, DType::kF32, {3, s.hidden_size}};
  const Tensor cache_a{cache_chunked.data, DType::kF32, {4, 20}};
  cpu::mla_attention(w, AttentionBatch{{4}, {0}}, MlaForm::kNaive, x_a, cache_a, out_a);
  cpu::mla_attention(w, AttentionBatch{{3}, {4}}, MlaForm::kAbsorbed, x_b, cache_chunked, out_b);
  std::vector<float> chunked = pool_.read(out_a);
  const std::vector<float> b = pool_.read(out_b);
  chunked.insert(chunked.end(), b.begin(), b.end());
  EXPECT_LT(testing::max_rel_diff(chunked, pool_.read(out_one)), 1e-5);
  EXPECT_LT(testing::max_rel_diff(pool_.read(cache_chunked), pool_.read(cache_one)), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(QueryCompression, MlaTest, ::testing::Values(int64_t{0}, int64_t{12}));

}  // namespace
}  // namespace moesim::engine
