#include "engine/permutation.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/cpu/cpu_backend.h"
#include "test_util.h"

namespace moesim::engine {
namespace {

TEST(ForcedRouting, ReproducesCountsWithDistinctExpertsPerToken) {
  // 5 tokens, top-2: 10 selections; expert 3 chosen by all 5 tokens (on two replicas).
  std::vector<ExpertSelectionCount> counts = {
      {7, 1, 2}, {3, 0, 3}, {1, 0, 1}, {3, 1, 2}, {0, 0, 2}};
  const ForcedRouting r = assign_forced_routing(5, 2, counts);
  std::map<std::pair<int32_t, int32_t>, int64_t> got;
  for (int64_t t = 0; t < 5; ++t) {
    std::set<int32_t> experts;
    for (int64_t j = 0; j < 2; ++j) {
      experts.insert(r.expert_ids[t * 2 + j]);
      ++got[{r.expert_ids[t * 2 + j], r.dst_gpus[t * 2 + j]}];
    }
    EXPECT_EQ(experts.size(), 2u) << "token " << t << " picked an expert twice";
  }
  for (const ExpertSelectionCount& c : counts) EXPECT_EQ((got[{c.expert, c.dst_gpu}]), c.count);
}

TEST(Permutation, GroupsByExpertStably) {
  // 3 tokens, top-2, 4 experts.
  const std::vector<int32_t> ids = {2, 0, 0, 3, 2, 1};
  const Permutation p = make_permutation(ids, 2, 4);
  EXPECT_EQ(p.tokens_per_expert, (std::vector<int64_t>{2, 1, 2, 1}));
  EXPECT_EQ(p.scatter_rows, (std::vector<int32_t>{1, 2, 5, 0, 4, 3}));
  EXPECT_EQ(p.gather_rows, (std::vector<int32_t>{0, 1, 2, 0, 2, 1}));
}

TEST(Permutation, PermuteThenUnpermuteIsTheIdentityOnSlots) {
  auto backend = cpu::make_cpu_backend({});
  testing::TensorPool pool(*backend);
  const int64_t tokens = 6, top_k = 2, hidden = 8;
  const std::vector<int32_t> ids = {1, 4, 0, 1, 3, 2, 4, 0, 2, 3, 1, 0};
  const Permutation p = make_permutation(ids, top_k, 5);
  const Tensor x = pool.random(DType::kBF16, {tokens, hidden});
  const Tensor permuted = pool.zeros(DType::kBF16, {tokens * top_k, hidden});
  const Tensor slots = pool.zeros(DType::kBF16, {tokens * top_k, hidden});
  backend->permute(x, pool.ints({tokens * top_k}, p.gather_rows), permuted);
  backend->unpermute(permuted, pool.ints({tokens * top_k}, p.scatter_rows), slots);
  const std::vector<float> xs = pool.read(x);
  const std::vector<float> out = pool.read(slots);
  for (int64_t slot = 0; slot < tokens * top_k; ++slot) {
    for (int64_t c = 0; c < hidden; ++c) {
      EXPECT_EQ(out[slot * hidden + c], xs[(slot / top_k) * hidden + c]);
    }
  }
  // Rows of one expert are contiguous in the permuted tensor.
  const std::vector<float> perm = pool.read(permuted);
  int64_t row = 0;
  for (int64_t e = 0; e < 5; ++e) {
    for (int64_t i = 0; i < p.tokens_per_expert[e]; ++i, ++row) {
      EXPECT_EQ(ids[p.scatter_rows[row]], e);
      EXPECT_EQ(perm[row * hidden], xs[p.gather_rows[row] * hidden]);
    }
  }
}

}  // namespace
}  // namespace moesim::engine
