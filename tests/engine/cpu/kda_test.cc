// KDA reference: the recurrence matches the closed form for two steps; the full layer carries
// its recurrent and convolution state exactly across chunks and sequences.
#include <gtest/gtest.h>

#include "../test_util.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference.h"
#include "engine/synthetic.h"

namespace moesim::engine {
namespace {

using Mat = std::vector<std::vector<double>>;

Mat zeros(int64_t r, int64_t c) { return Mat(r, std::vector<double>(c, 0.0)); }

TEST(KdaRecurrence, TwoStepsMatchTheClosedForm) {
  const int64_t dk = 3, dv = 4;
  std::vector<float> s0(dk * dv), q(dk), k1(dk), k2(dk), v1(dv), v2(dv), a1(dk), a2(dk);
  uint64_t i = 0;
  auto fill = [&](std::vector<float>& v, float lo, float hi) {
    for (float& x : v) x = lo + (hi - lo) * 0.5f * (1.0f + synthetic_value(7, i++));
  };
  fill(s0, -1, 1), fill(q, -1, 1), fill(k1, -1, 1), fill(k2, -1, 1), fill(v1, -1, 1);
  fill(v2, -1, 1), fill(a1, 0.5f, 1.0f), fill(a2, 0.5f, 1.0f);
  const float b1 = 0.3f, b2 = 0.8f;

  // Closed form: S_t = (I - b k k^T) Diag(a) S_{t-1} + b k v^T; o_2 = S_2^T q.
  Mat s = zeros(dk, dv);
  for (int64_t r = 0; r < dk; ++r)
    for (int64_t c = 0; c < dv; ++c) s[r][c] = s0[r * dv + c];
  auto step = [&](const std::vector<float>& k, const std::vector<float>& v,
                  const std::vector<float>& a, double b) {
    Mat decayed = zeros(dk, dv), next = zeros(dk, dv);
    for (int64_t r = 0; r < dk; ++r)
      for (int64_t c = 0; c < dv; ++c) decayed[r][c] = a[r] * s[r][c];
    for (int64_t r = 0; r < dk; ++r) {
      for (int64_t c = 0; c < dv; ++c) {
        double acc = decayed[r][c] + b * k[r] * v[c];
        for (int64_t m = 0; m < dk; ++m) acc -= b * k[r] * k[m] * decayed[m][c];
        next[r][c] = acc;
      }
    }
    s = next;
  };
  step(k1, v1, a1, b1);
  step(k2, v2, a2, b2);
  std::vector<double> o_expected(dv, 0.0);
  for (int64_t c = 0; c < dv; ++c)
    for (int64_t r = 0; r < dk; ++r) o_expected[c] += s[r][c] * q[r];

  std::vector<float> state = s0, o(dv);
  cpu::kda_recurrence_step(dk, dv, q.data(), k1.data(), v1.data(), a1.data(), b1, state.data(),
                           o.data());
  cpu::kda_recurrence_step(dk, dv, q.data(), k2.data(), v2.data(), a2.data(), b2, state.data(),
                           o.data());
  for (int64_t c = 0; c < dv; ++c) EXPECT_NEAR(o[c], o_expected[c], 1e-5);
  for (int64_t r = 0; r < dk; ++r)
    for (int64_t c = 0; c < dv; ++c) EXPECT_NEAR(state[r * dv + c], s[r][c], 1e-5);
}

class KdaLayerTest : public ::testing::Test {
 protected:
  static constexpr int64_t kHidden = 16, kHeads = 2, kDk = 4, kDv = 6, kTaps = 3, kRank = 4;
  static constexpr int64_t kChannels = kHeads * (2 * kDk + kDv);

  void SetUp() override {
    w_.shape = KdaShape{kHidden, kHeads, kDk, kDv, kTaps, kRank, true};
    w_.w_q = pool_.random(DType::kBF16, {kHidden, kHeads * kDk});
    w_.w_k = pool_.random(DType::kBF16, {kHidden, kHeads * kDk});
    w_.w_v = pool_.random(DType::kBF16, {kHidden, kHeads * kDv});
    w_.conv_q = pool_.random(DType::kBF16, {kTaps, kHeads * kDk});
    w_.conv_k = pool_.random(DType::kBF16, {kTaps, kHeads * kDk});
    w_.conv_v = pool_.random(DType::kBF16, {kTaps, kHeads * kDv});
    w_.w_f_a = pool_.random(DType::kBF16, {kHidden, kRank});
    w_.w_f_b = pool_.random(DType::kBF16, {kRank, kHeads * kDk});
    w_.w_beta = pool_.random(DType::kBF16, {kHidden, kHeads});
    w_.w_g_a = pool_.random(DType::kBF16, {kHidden, kRank});
    w_.w_g_b = pool_.random(DType::kBF16, {kRank, kHeads * kDv});
    w_.a_log = pool_.random(DType::kF32, {kHeads});
    w_.dt_bias = pool_.random(DType::kF32, {kHeads * kDk});
    w_.o_norm = pool_.random(DType::kBF16, {kDv}, 1.0f);
    w_.w_o = pool_.random(DType::kBF16, {kHeads * kDv, kHidden});
  }
  KdaState fresh_state(int64_t num_seqs) {
    return KdaState{pool_.zeros(DType::kF32, {num_seqs, kHeads, kDk, kDv}),
                    pool_.zeros(DType::kF32, {num_seqs, kTaps - 1, kChannels})};
  }
  static Tensor rows(const Tensor& x, int64_t begin, int64_t n) {
    return Tensor{static_cast<float*>(x.data) + begin * x.cols(), x.dtype, {n, x.cols()}};
  }

  std::unique_ptr<Backend> backend_ = cpu::make_cpu_backend({});
  testing::TensorPool pool_{*backend_};
  KdaWeights w_;
};

TEST_F(KdaLayerTest, ChunksCarryStateExactly) {
  const Tensor x = pool_.random(DType::kF32, {5, kHidden});
  const KdaState one = fresh_state(1);
  const Tensor out_one = pool_.zeros(DType::kF32, {5, kHidden});
  cpu::kda_attention(w_, AttentionBatch{{5}, {0}}, x, one, out_one);
  // 2 tokens, then 1 (decode), then 2.
  const KdaState chunked = fresh_state(1);
  const Tensor out = pool_.zeros(DType::kF32, {5, kHidden});
  cpu::kda_attention(w_, AttentionBatch{{2}, {0}}, rows(x, 0, 2), chunked, rows(out, 0, 2));
  cpu::kda_attention(w_, AttentionBatch{{1}, {2}}, rows(x, 2, 1), chunked, rows(out, 2, 1));
  cpu::kda_attention(w_, AttentionBatch{{2}, {3}}, rows(x, 3, 2), chunked, rows(out, 3, 2));
  EXPECT_LT(testing::max_rel_diff(pool_.read(out), pool_.read(out_one)), 1e-5);
  EXPECT_LT(testing::max_rel_diff(pool_.read(chunked.recurrent), pool_.read(one.recurrent)), 1e-5);
  EXPECT_LT(testing::max_rel_diff(pool_.read(chunked.conv), pool_.read(one.conv)), 1e-6);
}

TEST_F(KdaLayerTest, SequencesInABatchAreIndependent) {
  const Tensor x = pool_.random(DType::kF32, {4, kHidden});
  const KdaState both = fresh_state(2);
  const Tensor out_both = pool_.zeros(DType::kF32, {4, kHidden});
  cpu::kda_attention(w_, AttentionBatch{{3, 1}, {0, 0}}, x, both, out_both);
  const KdaState first = fresh_state(1), second = fresh_state(1);
  const Tensor out = pool_.zeros(DType::kF32, {4, kHidden});
  cpu::kda_attention(w_, AttentionBatch{{3}, {0}}, rows(x, 0, 3), first, rows(out, 0, 3));
  cpu::kda_attention(w_, AttentionBatch{{1}, {0}}, rows(x, 3, 1), second, rows(out, 3, 1));
  EXPECT_LT(testing::max_rel_diff(pool_.read(out), pool_.read(out_both)), 1e-6);
  // The state of a fresh sequence moved.
  double moved = 0;
  for (float v : pool_.read(second.recurrent)) moved += std::fabs(v);
  EXPECT_GT(moved, 1e-4);
}

}  // namespace
}  // namespace moesim::engine
