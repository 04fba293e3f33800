// Grouped SwiGLU FFN reference, BF16 or FP8 (W8A8 with per-row activation scales) weights.
#include <cmath>

#include "base/check.h"
#include "engine/cpu/host_matrix.h"
#include "engine/cpu/reference.h"

namespace moesim::engine::cpu {

namespace {

// Quantises each row of m to FP8 with scale amax(row) / 448 (1 for an all-zero row); returns the
// dequantised matrix (fp8 value * row scale), which is what an FP8 GEMM with FP32 accumulate and
// per-row scales computes with.
MatF fake_quantize_rows_fp8(const MatF& m) {
  MatF q(m.rows(), m.cols());
  for (int64_t r = 0; r < m.rows(); ++r) {
    const float amax = m.row(r).cwiseAbs().maxCoeff();
    const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
    for (int64_t c = 0; c < m.cols(); ++c) q(r, c) = round_fp8e4m3(m(r, c) / scale) * scale;
  }
  return q;
}

float silu(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace

void expert_ffn(const Tensor& x, const std::vector<int64_t>& tokens_per_expert, const FfnWeights& w,
                const Tensor& out) {
  const int64_t hidden = w.hidden_size;
  const int64_t inter = w.intermediate_size;
  MOESIM_CHECK(static_cast<int64_t>(tokens_per_expert.size()) == w.num_experts,
               "expert_ffn: one count per expert");
  MOESIM_CHECK(w.gate_up.shape == (Shape{w.num_experts, hidden, 2 * inter}),
               "expert_ffn: gate_up shape");
  MOESIM_CHECK(w.down.shape == (Shape{w.num_experts, inter, hidden}), "expert_ffn: down shape");
  MOESIM_CHECK(x.cols() == hidden && out.shape == x.shape, "expert_ffn: x/out shape");
  const bool fp8 = w.gate_up.dtype == DType::kFP8E4M3;
  MOESIM_CHECK(!fp8 || (!w.gate_up_scale.empty() && !w.down_scale.empty()),
               "expert_ffn: FP8 weights need scales");
  int64_t row0 = 0;
  for (int64_t e = 0; e < w.num_experts; ++e) {
    const int64_t n = tokens_per_expert[e];
    MOESIM_CHECK(n >= 0 && row0 + n <= x.rows(), "expert_ffn: counts exceed rows");
    if (n == 0) continue;
    MatF xe = load_rows(x, row0, n);
    MatF gate_up = load_slice(w.gate_up, e);
    MatF down = load_slice(w.down, e);
    if (fp8) {
      gate_up *= load_element(w.gate_up_scale, e);
      down *= load_element(w.down_scale, e);
      xe = fake_quantize_rows_fp8(xe);
    }
    const MatF h = xe * gate_up;  // [n, 2I]
    MatF act(n, inter);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < inter; ++c) act(r, c) = silu(h(r, c)) * h(r, inter + c);
    }
    // The activation between the two GEMMs is stored in BF16 (FP8 path: per-row FP8).
    if (fp8) {
      act = fake_quantize_rows_fp8(act);
    } else {
      round_through(act, DType::kBF16);
    }
    store_rows(act * down, out, row0);
    row0 += n;
  }
  MOESIM_CHECK(row0 == x.rows(), "expert_ffn: counts must cover every row");
}

}  // namespace moesim::engine::cpu
