// MLA reference, naive and absorbed forms (see MlaForm in engine/backend.h).
#include <cmath>

#include "base/check.h"
#include "engine/cpu/attend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine::cpu {

void mla_attention(const MlaWeights& w, const AttentionBatch& batch, MlaForm form, const Tensor& x,
                   const Tensor& latent_cache, const Tensor& out) {
  const MlaShape& s = w.shape;
  const int64_t num_tokens = batch.total_new_tokens();
  const int64_t lora = s.kv_lora_rank;
  const int64_t rope = s.qk_rope_head_dim;
  const int64_t nope = s.qk_nope_head_dim;
  const int64_t qk_dim = nope + rope;
  MOESIM_CHECK(x.rows() == num_tokens && x.cols() == s.hidden_size, "mla: x shape");
  MOESIM_CHECK(out.rows() == num_tokens && out.cols() == s.hidden_size, "mla: out shape");
  MOESIM_CHECK(
      latent_cache.rows() == batch.total_cache_rows() && latent_cache.cols() == lora + rope,
      "mla: latent cache shape");

  const MatF xm = load_matrix(x);
  // Queries [T, heads * (nope + rope)].
  MatF q;
  if (s.q_lora_rank > 0) {
    MatF c_q = xm * load_matrix(w.w_q_a);
    rmsnorm_rows(c_q, load_vector(w.q_a_norm), kInnerNormEps);
    q = c_q * load_matrix(w.w_q_b);
  } else {
    q = xm * load_matrix(w.w_q_b);
  }
  // New cache entries: normalised latent, rotated shared key.
  MatF kv = xm * load_matrix(w.w_kv_a);
  MatF latent = kv.leftCols(lora);
  rmsnorm_rows(latent, load_vector(w.kv_a_norm), kInnerNormEps);
  kv.leftCols(lora) = latent;
  for (int64_t seq = 0; seq < batch.num_sequences(); ++seq) {
    const int64_t row0 = batch.token_row_offset(seq);
    const int64_t cache0 = batch.cache_row_offset(seq) + batch.context_tokens[seq];
    for (int64_t i = 0; i < batch.new_tokens[seq]; ++i) {
      const int64_t pos = batch.context_tokens[seq] + i;
      apply_rope(kv.row(row0 + i).data() + lora, rope, pos);
      for (int64_t h = 0; h < s.num_heads; ++h) {
        apply_rope(q.row(row0 + i).data() + h * qk_dim + nope, rope, pos);
      }
    }
    store_rows(kv.middleRows(row0, batch.new_tokens[seq]), latent_cache, cache0);
  }

  const MatF kv_b = load_matrix(w.w_kv_b);  // [lora, heads * (nope + v)]
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk_dim));
  MatF attn(num_tokens, s.num_heads * s.v_head_dim);
  for (int64_t seq = 0; seq < batch.num_sequences(); ++seq) {
    const int64_t n = batch.new_tokens[seq];
    const int64_t context = batch.context_tokens[seq];
    const int64_t row0 = batch.token_row_offset(seq);
    const MatF cache = load_rows(latent_cache, batch.cache_row_offset(seq), context + n);
    const MatF c_kv = cache.leftCols(lora);
    const MatF k_pe = cache.rightCols(rope);
    for (int64_t h = 0; h < s.num_heads; ++h) {
      const int64_t col = h * (nope + s.v_head_dim);
      const MatF w_uk = kv_b.middleCols(col, nope);
      const MatF w_uv = kv_b.middleCols(col + nope, s.v_head_dim);
      const MatF q_nope = q.block(row0, h * qk_dim, n, nope);
      const MatF q_pe = q.block(row0, h * qk_dim + nope, n, rope);
      MatF o;
      if (form == MlaForm::kNaive) {
        MatF k(context + n, qk_dim);
        k << c_kv * w_uk, k_pe;
        MatF qh(n, qk_dim);
        qh << q_nope, q_pe;
        o = attend_causal(qh, k, c_kv * w_uv, scale, context);
      } else {
        MatF qh(n, lora + rope);
        qh << q_nope * w_uk.transpose(), q_pe;
        o = attend_causal(qh, cache, c_kv, scale, context) * w_uv;
      }
      attn.block(row0, h * s.v_head_dim, n, s.v_head_dim) = o;
    }
  }
  store_matrix(attn * load_matrix(w.w_o), out);
}

}  // namespace moesim::engine::cpu
