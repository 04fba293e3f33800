// Weighted combine against a direct loop (permute / unpermute: tests/engine/permutation_test.cc).
#include <gtest/gtest.h>

#include "../test_util.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine {
namespace {

TEST(WeightedCombine, SumsWeightedSlotsPlusShared) {
  auto backend = cpu::make_cpu_backend({});
  testing::TensorPool pool(*backend);
  const int64_t tokens = 3, top_k = 2, hidden = 5;
  const Tensor slots = pool.random(DType::kBF16, {tokens, top_k, hidden});
  const Tensor weights = pool.from(DType::kF32, {tokens, top_k}, {0.7f, 0.3f, 0.5f, 0.5f, 1, 0});
  const Tensor shared = pool.random(DType::kBF16, {tokens, hidden});
  const Tensor out = pool.zeros(DType::kF32, {tokens, hidden});
  const Tensor out_no_shared = pool.zeros(DType::kF32, {tokens, hidden});
  cpu::weighted_combine(slots, weights, shared, out);
  cpu::weighted_combine(slots, weights, Tensor{}, out_no_shared);
  const std::vector<float> s = pool.read(slots), w = pool.read(weights), sh = pool.read(shared);
  const std::vector<float> got = pool.read(out), got_ns = pool.read(out_no_shared);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < hidden; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < top_k; ++j) acc += w[t * top_k + j] * s[(t * top_k + j) * hidden + c];
      EXPECT_NEAR(got_ns[t * hidden + c], acc, 1e-6);
      EXPECT_NEAR(got[t * hidden + c], acc + sh[t * hidden + c], 1e-6);
    }
  }
}

}  // namespace
}  // namespace moesim::engine
