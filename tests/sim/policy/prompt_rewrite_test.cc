// Rewriting prompts: kept blocks keep their hashes, all others are fresh and never collide with
// generator hashes or with each other.
#include "sim/policy/prompt_rewrite.h"

#include <gtest/gtest.h>

#include <set>

namespace moesim::sim {
namespace {

Request request_with_blocks(int64_t prompt_tokens) {
  Request r;
  r.prompt_tokens = prompt_tokens;
  for (int64_t b = 0; b < num_prefix_blocks(prompt_tokens); ++b) {
    r.prefix_block_hashes.push_back(static_cast<uint64_t>(b));
  }
  return r;
}

TEST(PromptRewriteTest, KeepsLeadingBlocksAndGivesTheRestFreshHashes) {
  Request r = request_with_blocks(3000);  // 6 blocks
  PolicyHashStream hashes(1);
  const std::vector<uint64_t> base = r.prefix_block_hashes;
  rewrite_prompt(r, 2000, 1024, base, 2, hashes);
  EXPECT_EQ(r.prompt_tokens, 2000);
  EXPECT_EQ(r.reused_prefix_tokens, 1024);
  ASSERT_EQ(r.prefix_block_hashes.size(), 4u);  // ceil(2000 / 512)
  EXPECT_EQ(r.prefix_block_hashes[0], 0u);
  EXPECT_EQ(r.prefix_block_hashes[1], 1u);
  std::set<uint64_t> fresh(r.prefix_block_hashes.begin() + 2, r.prefix_block_hashes.end());
  EXPECT_EQ(fresh.size(), 2u);
  for (uint64_t h : fresh) EXPECT_GE(h, uint64_t{1} << 63);
}

TEST(PromptRewriteTest, AliasedBaseAndStreamsNeverCollide) {
  Request r = request_with_blocks(1024);
  PolicyHashStream a(1), b(2);
  rewrite_prompt(r, 1024, 0, r.prefix_block_hashes, 1, a);  // base aliases the request
  EXPECT_EQ(r.prefix_block_hashes[0], 0u);
  std::set<uint64_t> seen;
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(seen.insert(a.next()).second);
    EXPECT_TRUE(seen.insert(b.next()).second);
  }
}

TEST(PromptRewriteTest, NothingKeptMeansAllFresh) {
  Request r = request_with_blocks(600);
  PolicyHashStream hashes(2);
  rewrite_prompt(r, 513, 0, {}, 0, hashes);
  ASSERT_EQ(r.prefix_block_hashes.size(), 2u);
  EXPECT_NE(r.prefix_block_hashes[0], r.prefix_block_hashes[1]);
  EXPECT_GE(r.prefix_block_hashes[0], uint64_t{1} << 63);
}

}  // namespace
}  // namespace moesim::sim
