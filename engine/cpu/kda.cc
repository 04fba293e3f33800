// KDA (Kimi Delta Attention) reference: short convolutions, gates, and the token-by-token gated
// delta-rule recurrence (see KdaWeights in engine/backend.h).
#include <cmath>

#include "base/check.h"
#include "engine/cpu/attend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine::cpu {

namespace {

float silu(float v) { return v / (1.0f + std::exp(-v)); }
float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }
float softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }

// L2-normalises each head_dim-wide block of every row in place.
void l2_normalize_heads(MatF& m, int64_t head_dim) {
  for (int64_t r = 0; r < m.rows(); ++r) {
    for (int64_t c = 0; c < m.cols(); c += head_dim) {
      auto block = m.row(r).segment(c, head_dim);
      block /= std::sqrt(block.squaredNorm() + kInnerNormEps);
    }
  }
}

}  // namespace

void kda_recurrence_step(int64_t dk, int64_t dv, const float* q, const float* k, const float* v,
                         const float* alpha, float beta, float* state, float* o) {
  Eigen::Map<MatF> s(state, dk, dv);
  Eigen::Map<const VecF> kv(k, dk);
  // Diag(alpha) S: decay row i by alpha_i.
  for (int64_t i = 0; i < dk; ++i) s.row(i) *= alpha[i];
  // (I - beta k k^T) S + beta k v^T = S + beta k (v^T - k^T S).
  const Eigen::RowVectorXf ks = kv.transpose() * s;
  Eigen::Map<const Eigen::RowVectorXf> vv(v, dv);
  s.noalias() += beta * kv * (vv - ks);
  Eigen::Map<VecF>(o, dv) = s.transpose() * Eigen::Map<const VecF>(q, dk);
}

void kda_attention(const KdaWeights& w, const AttentionBatch& batch, const Tensor& x,
                   const KdaState& state, const Tensor& out) {
  const KdaShape& s = w.shape;
  const int64_t heads = s.num_heads;
  const int64_t dk = s.head_dim_k;
  const int64_t dv = s.head_dim_v;
  const int64_t taps = s.short_conv_kernel;
  const int64_t channels = heads * (2 * dk + dv);
  const int64_t num_tokens = batch.total_new_tokens();
  const int64_t num_seqs = batch.num_sequences();
  MOESIM_CHECK(taps >= 1, "kda: short_conv_kernel must be >= 1");
  MOESIM_CHECK(x.rows() == num_tokens && x.cols() == s.hidden_size, "kda: x shape");
  MOESIM_CHECK(out.rows() == num_tokens && out.cols() == s.hidden_size, "kda: out shape");
  MOESIM_CHECK(state.recurrent.dtype == DType::kF32 &&
                   state.recurrent.num_elements() == num_seqs * heads * dk * dv,
               "kda: recurrent state shape");
  MOESIM_CHECK(state.conv.dtype == DType::kF32 &&
                   state.conv.num_elements() == num_seqs * (taps - 1) * channels,
               "kda: conv state shape");

  const MatF xm = load_matrix(x);
  // Projected inputs, q | k | v channels side by side: [T, channels].
  MatF proj(num_tokens, channels);
  proj << xm * load_matrix(w.w_q), xm * load_matrix(w.w_k), xm * load_matrix(w.w_v);
  MatF conv_w(taps, channels);
  conv_w << load_matrix(w.conv_q), load_matrix(w.conv_k), load_matrix(w.conv_v);

  // Causal depthwise convolution over [conv state; new rows], then SiLU; the state keeps the
  // last taps - 1 inputs.
  float* conv_state = static_cast<float*>(state.conv.data);
  MatF mixed(num_tokens, channels);
  for (int64_t seq = 0; seq < num_seqs; ++seq) {
    const int64_t n = batch.new_tokens[seq];
    const int64_t row0 = batch.token_row_offset(seq);
    Eigen::Map<MatF> hist_state(conv_state + seq * (taps - 1) * channels, taps - 1, channels);
    MatF hist(taps - 1 + n, channels);
    hist << hist_state, proj.middleRows(row0, n);
    for (int64_t i = 0; i < n; ++i) {
      Eigen::RowVectorXf acc = Eigen::RowVectorXf::Zero(channels);
      for (int64_t j = 0; j < taps; ++j) acc += conv_w.row(j).cwiseProduct(hist.row(i + j));
      mixed.row(row0 + i) = acc.unaryExpr([](float v) { return silu(v); });
    }
    hist_state = hist.bottomRows(taps - 1);
  }
  MatF q = mixed.leftCols(heads * dk);
  MatF k = mixed.middleCols(heads * dk, heads * dk);
  const MatF v = mixed.rightCols(heads * dv);
  l2_normalize_heads(q, dk);
  l2_normalize_heads(k, dk);
  q *= 1.0f / std::sqrt(static_cast<float>(dk));

  // Gates.
  const MatF f = (xm * load_matrix(w.w_f_a)) * load_matrix(w.w_f_b);  // [T, heads * dk]
  const VecF a_log = load_vector(w.a_log);
  const VecF dt_bias = load_vector(w.dt_bias);
  MatF alpha(num_tokens, heads * dk);
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t c = 0; c < heads * dk; ++c) {
      const float decay = std::exp(a_log[c / dk]);
      alpha(t, c) = std::exp(-decay * softplus(f(t, c) + dt_bias[c]));
    }
  }
  const MatF beta = (xm * load_matrix(w.w_beta)).unaryExpr([](float v) { return sigmoid(v); });

  // Recurrence.
  float* recurrent = static_cast<float*>(state.recurrent.data);
  MatF o(num_tokens, heads * dv);
  for (int64_t seq = 0; seq < num_seqs; ++seq) {
    const int64_t row0 = batch.token_row_offset(seq);
    for (int64_t h = 0; h < heads; ++h) {
      float* sh = recurrent + (seq * heads + h) * dk * dv;
      for (int64_t i = 0; i < batch.new_tokens[seq]; ++i) {
        const int64_t t = row0 + i;
        kda_recurrence_step(dk, dv, q.row(t).data() + h * dk, k.row(t).data() + h * dk,
                            v.row(t).data() + h * dv, alpha.row(t).data() + h * dk, beta(t, h), sh,
                            o.row(t).data() + h * dv);
      }
    }
  }

  // Output norm, gate, projection.
  const VecF o_norm = load_vector(w.o_norm);
  for (int64_t h = 0; h < heads; ++h) {
    MatF block = o.middleCols(h * dv, dv);
    rmsnorm_rows(block, o_norm, kInnerNormEps);
    o.middleCols(h * dv, dv) = block;
  }
  if (s.output_gate) {
    const MatF g = (xm * load_matrix(w.w_g_a)) * load_matrix(w.w_g_b);
    o = o.cwiseProduct(g.unaryExpr([](float v) { return sigmoid(v); }));
  }
  store_matrix(o * load_matrix(w.w_o), out);
}

}  // namespace moesim::engine::cpu
