// GQA reference (MHA when num_kv_heads == num_heads).
#include <cmath>

#include "base/check.h"
#include "engine/cpu/attend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine::cpu {

void gqa_attention(const GqaWeights& w, const AttentionBatch& batch, const Tensor& x,
                   const Tensor& k_cache, const Tensor& v_cache, const Tensor& out) {
  const GqaShape& s = w.shape;
  const int64_t d = s.head_dim;
  const int64_t num_tokens = batch.total_new_tokens();
  MOESIM_CHECK(s.num_kv_heads > 0 && s.num_heads % s.num_kv_heads == 0,
               "gqa: heads must be a multiple of kv heads");
  MOESIM_CHECK(x.rows() == num_tokens && x.cols() == s.hidden_size, "gqa: x shape");
  MOESIM_CHECK(out.rows() == num_tokens && out.cols() == s.hidden_size, "gqa: out shape");
  MOESIM_CHECK(k_cache.rows() == batch.total_cache_rows() && k_cache.cols() == s.num_kv_heads * d &&
                   v_cache.shape == k_cache.shape,
               "gqa: cache shape");

  const MatF xm = load_matrix(x);
  MatF q = xm * load_matrix(w.w_q);
  MatF k = xm * load_matrix(w.w_k);
  const MatF v = xm * load_matrix(w.w_v);
  if (s.qk_norm) {
    const VecF qn = load_vector(w.q_norm);
    const VecF kn = load_vector(w.k_norm);
    for (int64_t h = 0; h < s.num_heads; ++h) {
      MatF block = q.middleCols(h * d, d);
      rmsnorm_rows(block, qn, kInnerNormEps);
      q.middleCols(h * d, d) = block;
    }
    for (int64_t h = 0; h < s.num_kv_heads; ++h) {
      MatF block = k.middleCols(h * d, d);
      rmsnorm_rows(block, kn, kInnerNormEps);
      k.middleCols(h * d, d) = block;
    }
  }
  for (int64_t seq = 0; seq < batch.num_sequences(); ++seq) {
    const int64_t row0 = batch.token_row_offset(seq);
    for (int64_t i = 0; i < batch.new_tokens[seq]; ++i) {
      const int64_t pos = batch.context_tokens[seq] + i;
      for (int64_t h = 0; h < s.num_heads; ++h) apply_rope(q.row(row0 + i).data() + h * d, d, pos);
      for (int64_t h = 0; h < s.num_kv_heads; ++h) {
        apply_rope(k.row(row0 + i).data() + h * d, d, pos);
      }
    }
    const int64_t cache0 = batch.cache_row_offset(seq) + batch.context_tokens[seq];
    store_rows(k.middleRows(row0, batch.new_tokens[seq]), k_cache, cache0);
    store_rows(v.middleRows(row0, batch.new_tokens[seq]), v_cache, cache0);
  }

  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t group = s.num_heads / s.num_kv_heads;
  MatF attn(num_tokens, s.num_heads * d);
  for (int64_t seq = 0; seq < batch.num_sequences(); ++seq) {
    const int64_t n = batch.new_tokens[seq];
    const int64_t context = batch.context_tokens[seq];
    const int64_t row0 = batch.token_row_offset(seq);
    const MatF keys = load_rows(k_cache, batch.cache_row_offset(seq), context + n);
    const MatF values = load_rows(v_cache, batch.cache_row_offset(seq), context + n);
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t g = h / group;
      attn.block(row0, h * d, n, d) =
          attend_causal(q.block(row0, h * d, n, d), keys.middleCols(g * d, d),
                        values.middleCols(g * d, d), scale, context);
    }
  }
  store_matrix(attn * load_matrix(w.w_o), out);
}

}  // namespace moesim::engine::cpu
