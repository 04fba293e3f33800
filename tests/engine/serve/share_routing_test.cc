#include "engine/serve/share_routing.h"

#include <gtest/gtest.h>

#include <map>

namespace moesim::engine::serve {
namespace {

TracePlacement one_per_gpu(int32_t experts, int32_t gpus) {
  TracePlacement p;
  p.num_slots_per_gpu = experts / gpus;
  for (int32_t e = 0; e < experts; ++e) p.expert_gpus.push_back({e % gpus});
  return p;
}

TEST(ShareRouting, CountsSumToTopKPerTokenAndNoExpertTwicePerToken) {
  const TracePlacement p = one_per_gpu(8, 2);
  const std::vector<double> share = {4, 1, 1, 1, 1, 1, 1, 0};
  const auto entries = sample_share_routing(share, 2, {{0, 5}, {1, 3}}, p, {0, 1}, 42);
  std::map<int32_t, int64_t> per_src, per_expert_src0;
  for (const RoutingEntry& e : entries) {
    per_src[e.src_gpu] += e.count;
    if (e.src_gpu == 0) per_expert_src0[e.expert] += e.count;
    EXPECT_EQ(e.dst_gpu, e.expert % 2) << "each expert lives on one GPU";
    EXPECT_NE(e.expert, 7) << "an expert of zero share is never drawn";
  }
  EXPECT_EQ(per_src[0], 10);
  EXPECT_EQ(per_src[1], 6);
  for (const auto& [expert, count] : per_expert_src0) EXPECT_LE(count, 5) << expert;
}

TEST(ShareRouting, FollowsTheShares) {
  // 2 of 4 experts per token; expert 0 holds 70% of the weight. Its inclusion probability under
  // weighted sampling without replacement is 1 - P(not first) P(not second | ...), about 0.96.
  const TracePlacement p = one_per_gpu(4, 1);
  const std::vector<double> share = {0.7, 0.1, 0.1, 0.1};
  const auto entries = sample_share_routing(share, 2, {{0, 20000}}, p, {0}, 7);
  int64_t expert0 = 0;
  for (const RoutingEntry& e : entries) {
    if (e.expert == 0) expert0 += e.count;
  }
  // P(0 first) = 0.7; P(0 second) = 3 x 0.1 x 0.7 / 0.9 = 0.2333: 0.9333 of tokens.
  EXPECT_NEAR(static_cast<double>(expert0) / 20000, 0.9333, 0.01);
}

TEST(ShareRouting, LocalReplicaFirstElseTurns) {
  // Expert 0 on GPUs 0 and 1, expert 1 on GPU 1 only; 2 GPUs, top-1, only expert 0 drawn.
  TracePlacement p;
  p.expert_gpus = {{0, 1}, {1}, {0, 2}};  // GPU 2 is another replica's
  const auto entries = sample_share_routing({1, 0, 0}, 1, {{0, 3}, {1, 2}}, p, {0, 1}, 1);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].src_gpu, 0);
  EXPECT_EQ(entries[0].dst_gpu, 0);
  EXPECT_EQ(entries[0].count, 3);
  EXPECT_EQ(entries[1].src_gpu, 1);
  EXPECT_EQ(entries[1].dst_gpu, 1);
  EXPECT_EQ(entries[1].count, 2);
  // From GPU 0, expert 0 held by GPUs 1 and 2 only: the picks alternate between them.
  p.expert_gpus = {{1, 2}, {1}, {2}};
  const auto turns = sample_share_routing({1, 0, 0}, 1, {{0, 4}}, p, {0, 1, 2}, 1);
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_EQ(turns[0].dst_gpu, 1);
  EXPECT_EQ(turns[0].count, 2);
  EXPECT_EQ(turns[1].dst_gpu, 2);
  EXPECT_EQ(turns[1].count, 2);
}

TEST(ShareRouting, SameSeedSameDraws) {
  const TracePlacement p = one_per_gpu(16, 4);
  const std::vector<double> share(16, 1.0);
  const auto a = sample_share_routing(share, 4, {{0, 64}, {3, 9}}, p, {0, 1, 2, 3}, 99);
  const auto b = sample_share_routing(share, 4, {{0, 64}, {3, 9}}, p, {0, 1, 2, 3}, 99);
  const auto c = sample_share_routing(share, 4, {{0, 64}, {3, 9}}, p, {0, 1, 2, 3}, 100);
  ASSERT_EQ(a.size(), b.size());
  bool differs = a.size() != c.size();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].count, b[i].count);
    EXPECT_EQ(a[i].expert, b[i].expert);
    if (!differs && (a[i].count != c[i].count || a[i].expert != c[i].expert)) differs = true;
  }
  EXPECT_TRUE(differs);
  EXPECT_NE(routing_seed(1, 0, 1), routing_seed(1, 1, 0));
}

}  // namespace
}  // namespace moesim::engine::serve
