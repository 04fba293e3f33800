// GQA reference: equals MHA with each KV head repeated for its query group; decode over the
// cache equals the matching row of a full prefill; attention checked against a direct loop.
#include <gtest/gtest.h>

#include <cmath>

#include "../test_util.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine {
namespace {

constexpr int64_t kHidden = 24, kHeads = 4, kKvHeads = 2, kDim = 8;

class GqaTest : public ::testing::Test {
 protected:
  GqaWeights make(const GqaShape& s) {
    GqaWeights w;
    w.shape = s;
    w.w_q = pool_.random(DType::kBF16, {kHidden, s.num_heads * kDim}, 0.3f);
    w.w_k = pool_.random(DType::kBF16, {kHidden, s.num_kv_heads * kDim}, 0.3f);
    w.w_v = pool_.random(DType::kBF16, {kHidden, s.num_kv_heads * kDim}, 0.3f);
    w.w_o = pool_.random(DType::kBF16, {s.num_heads * kDim, kHidden}, 0.3f);
    return w;
  }
  std::unique_ptr<Backend> backend_ = cpu::make_cpu_backend({});
  testing::TensorPool pool_{*backend_};
};

TEST_F(GqaTest, EqualsMhaWithRepeatedKvHeads) {
  const GqaShape gs{kHidden, kHeads, kKvHeads, kDim, false};
  const GqaWeights g = make(gs);
  // MHA weights: KV head h / 2 copied into head h.
  GqaWeights m = g;
  m.shape.num_kv_heads = kHeads;
  const std::vector<float> wk = pool_.read(g.w_k), wv = pool_.read(g.w_v);
  std::vector<float> mk(kHidden * kHeads * kDim), mv(mk.size());
  for (int64_t r = 0; r < kHidden; ++r) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t c = 0; c < kDim; ++c) {
        mk[(r * kHeads + h) * kDim + c] = wk[(r * kKvHeads + h / 2) * kDim + c];
        mv[(r * kHeads + h) * kDim + c] = wv[(r * kKvHeads + h / 2) * kDim + c];
      }
    }
  }
  m.w_k = pool_.from(DType::kBF16, {kHidden, kHeads * kDim}, mk);
  m.w_v = pool_.from(DType::kBF16, {kHidden, kHeads * kDim}, mv);
  const AttentionBatch batch{{4, 1}, {0, 5}};
  const Tensor x = pool_.random(DType::kF32, {5, kHidden});
  // Cached context: the MHA cache repeats the GQA cache's KV heads.
  const int64_t rows = batch.total_cache_rows();
  const Tensor gk = pool_.random(DType::kF32, {rows, kKvHeads * kDim});
  const Tensor gv = pool_.random(DType::kF32, {rows, kKvHeads * kDim});
  const std::vector<float> gkv = pool_.read(gk), gvv = pool_.read(gv);
  std::vector<float> mkc(rows * kHeads * kDim), mvc(mkc.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t c = 0; c < kDim; ++c) {
        mkc[(r * kHeads + h) * kDim + c] = gkv[(r * kKvHeads + h / 2) * kDim + c];
        mvc[(r * kHeads + h) * kDim + c] = gvv[(r * kKvHeads + h / 2) * kDim + c];
      }
    }
  }
  const Tensor mk_cache = pool_.from(DType::kF32, {rows, kHeads * kDim}, mkc);
  const Tensor mv_cache = pool_.from(DType::kF32, {rows, kHeads * kDim}, mvc);
  const Tensor out_g = pool_.zeros(DType::kF32, {5, kHidden});
  const Tensor out_m = pool_.zeros(DType::kF32, {5, kHidden});
  cpu::gqa_attention(g, batch, x, gk, gv, out_g);
  cpu::gqa_attention(m, batch, x, mk_cache, mv_cache, out_m);
  EXPECT_LT(testing::max_rel_diff(pool_.read(out_g), pool_.read(out_m)), 1e-5);
}

TEST_F(GqaTest, DecodeEqualsLastRowOfPrefillAndADirectLoop) {
  const GqaShape gs{kHidden, kHeads, kKvHeads, kDim, true};
  GqaWeights g = make(gs);
  g.q_norm = pool_.random(DType::kBF16, {kDim}, 1.0f);
  g.k_norm = pool_.random(DType::kBF16, {kDim}, 1.0f);
  const Tensor x = pool_.random(DType::kF32, {6, kHidden});
  const Tensor k1 = pool_.zeros(DType::kF32, {6, kKvHeads * kDim});
  const Tensor v1 = pool_.zeros(DType::kF32, {6, kKvHeads * kDim});
  const Tensor out_full = pool_.zeros(DType::kF32, {6, kHidden});
  cpu::gqa_attention(g, AttentionBatch{{6}, {0}}, x, k1, v1, out_full);
  // Prefill 5, then decode the 6th token against the cache.
  const Tensor k2 = pool_.zeros(DType::kF32, {6, kKvHeads * kDim});
  const Tensor v2 = pool_.zeros(DType::kF32, {6, kKvHeads * kDim});
  const Tensor out5 = pool_.zeros(DType::kF32, {5, kHidden});
  const Tensor out1 = pool_.zeros(DType::kF32, {1, kHidden});
  cpu::gqa_attention(g, AttentionBatch{{5}, {0}}, Tensor{x.data, DType::kF32, {5, kHidden}},
                     Tensor{k2.data, DType::kF32, {5, kKvHeads * kDim}},
                     Tensor{v2.data, DType::kF32, {5, kKvHeads * kDim}}, out5);
  cpu::gqa_attention(g, AttentionBatch{{1}, {5}},
                     Tensor{static_cast<float*>(x.data) + 5 * kHidden, DType::kF32, {1, kHidden}},
                     k2, v2, out1);
  const std::vector<float> full = pool_.read(out_full);
  const std::vector<float> last(full.begin() + 5 * kHidden, full.end());
  EXPECT_LT(testing::max_rel_diff(pool_.read(out1), last), 1e-5);

  // Direct loop for the decode token from the cache contents (K already normed and rotated).
  const std::vector<float> xs = pool_.read(x), kc = pool_.read(k2), vc = pool_.read(v2);
  const std::vector<float> wq = pool_.read(g.w_q), wo = pool_.read(g.w_o);
  const std::vector<float> qn = pool_.read(g.q_norm);
  std::vector<float> xrow(xs.begin() + 5 * kHidden, xs.end());
  const std::vector<double> q = testing::matmul(xrow, wq, 1, kHidden, kHeads * kDim);
  std::vector<float> attn(kHeads * kDim);
  for (int64_t h = 0; h < kHeads; ++h) {
    std::vector<float> qh(kDim);
    double ss = 0;
    for (int64_t c = 0; c < kDim; ++c) ss += q[h * kDim + c] * q[h * kDim + c];
    for (int64_t c = 0; c < kDim; ++c) {
      qh[c] = static_cast<float>(q[h * kDim + c] / std::sqrt(ss / kDim + 1e-6) * qn[c]);
    }
    cpu::apply_rope(qh.data(), kDim, 5);
    const int64_t g_idx = h / 2;
    std::vector<double> p(6);
    double max_s = -1e30, sum = 0;
    for (int64_t j = 0; j < 6; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < kDim; ++c) dot += qh[c] * kc[(j * kKvHeads + g_idx) * kDim + c];
      p[j] = dot / std::sqrt(static_cast<double>(kDim));
      max_s = std::max(max_s, p[j]);
    }
    for (double& v : p) sum += (v = std::exp(v - max_s));
    for (int64_t c = 0; c < kDim; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < 6; ++j) acc += p[j] / sum * vc[(j * kKvHeads + g_idx) * kDim + c];
      attn[h * kDim + c] = static_cast<float>(acc);
    }
  }
  const std::vector<double> expected = testing::matmul(attn, wo, 1, kHeads * kDim, kHidden);
  EXPECT_LT(
      testing::max_rel_diff(pool_.read(out1), std::vector<float>(expected.begin(), expected.end())),
      1e-4);
}

}  // namespace
}  // namespace moesim::engine
