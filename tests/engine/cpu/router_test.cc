// Router reference: softmax and sigmoid top-k against a direct computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "../test_util.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine {
namespace {

constexpr int64_t kTokens = 5, kHidden = 12, kExperts = 8, kTopK = 3;

void check_router(ScoringFunc scoring, bool normalize, bool with_bias) {
  auto backend = cpu::make_cpu_backend({});
  testing::TensorPool pool(*backend);
  const Tensor x = pool.random(DType::kBF16, {kTokens, kHidden});
  RouterWeights w;
  w.w_gate = pool.random(DType::kBF16, {kHidden, kExperts});
  if (with_bias) w.bias = pool.random(DType::kF32, {kExperts}, 0.2f);
  const RouterConfig config{kExperts, kTopK, scoring, normalize, 2.5f};
  const Tensor ids = pool.ints({kTokens, kTopK}, std::vector<int32_t>(kTokens * kTopK, -1));
  const Tensor weights = pool.zeros(DType::kF32, {kTokens, kTopK});
  cpu::router(x, w, config, ids, weights);
  const std::vector<int32_t> got_ids = download_ints(*backend, ids);
  const std::vector<float> got_w = pool.read(weights);

  const std::vector<double> logits =
      testing::matmul(pool.read(x), pool.read(w.w_gate), kTokens, kHidden, kExperts);
  const std::vector<float> bias = with_bias ? pool.read(w.bias) : std::vector<float>(kExperts, 0);
  for (int64_t t = 0; t < kTokens; ++t) {
    std::vector<double> score(kExperts), key(kExperts);
    double sum = 0;
    for (int64_t e = 0; e < kExperts; ++e) sum += std::exp(logits[t * kExperts + e]);
    for (int64_t e = 0; e < kExperts; ++e) {
      const double l = logits[t * kExperts + e];
      score[e] = scoring == ScoringFunc::kSoftmax ? std::exp(l) / sum : 1 / (1 + std::exp(-l));
      key[e] = scoring == ScoringFunc::kSoftmax ? score[e] : score[e] + bias[e];
    }
    std::vector<int> order(kExperts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key[a] > key[b]; });
    double picked = 0;
    for (int j = 0; j < kTopK; ++j) picked += score[order[j]];
    for (int j = 0; j < kTopK; ++j) {
      EXPECT_EQ(got_ids[t * kTopK + j], order[j]) << "token " << t << " choice " << j;
      const double expected = (normalize ? score[order[j]] / picked : score[order[j]]) * 2.5;
      EXPECT_NEAR(got_w[t * kTopK + j], expected, 1e-5);
    }
  }
}

TEST(Router, SoftmaxTopK) { check_router(ScoringFunc::kSoftmax, false, false); }
TEST(Router, SoftmaxTopKNormalised) { check_router(ScoringFunc::kSoftmax, true, false); }
TEST(Router, SigmoidTopKWithBias) { check_router(ScoringFunc::kSigmoid, true, true); }

}  // namespace
}  // namespace moesim::engine
