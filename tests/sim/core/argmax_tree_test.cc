#include "sim/core/argmax_tree.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/core/rng.h"

namespace moesim::sim {
namespace {

// The obvious implementation: a scan keeping the first strictly larger key.
int32_t scan_first_max(const std::vector<int64_t>& keys) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(keys.size()); ++i) {
    if (keys[i] > keys[best]) best = i;
  }
  return best;
}

TEST(ArgMaxTree, TiesGoToTheSmallestIndex) {
  ArgMaxTree t;
  t.build(5, [](int32_t) { return int64_t{7}; });
  EXPECT_EQ(t.first_max(), 0);
  t.update(0, 6);
  EXPECT_EQ(t.first_max(), 1);
  t.update(3, 8);
  EXPECT_EQ(t.first_max(), 3);
  t.update(2, 8);
  EXPECT_EQ(t.first_max(), 2);
}

TEST(ArgMaxTree, NoneNeverBeatsARealKey) {
  ArgMaxTree t;
  t.build(3, [](int32_t i) {
    return i == 2 ? std::numeric_limits<int64_t>::min() + 1 : ArgMaxTree::kNone;
  });
  EXPECT_EQ(t.first_max(), 2);
  t.update(2, ArgMaxTree::kNone);
  EXPECT_EQ(t.key(t.first_max()), ArgMaxTree::kNone);  // all kNone: index 0
  EXPECT_EQ(t.first_max(), 0);
}

TEST(ArgMaxTree, MatchesAScanUnderRandomUpdates) {
  RngStream rng(2026, "argmax_tree_test");
  for (const int32_t n : {1, 2, 3, 7, 8, 9, 100, 128, 129}) {
    std::vector<int64_t> keys(static_cast<size_t>(n));
    // Few distinct values: ties are common.
    for (int64_t& k : keys) k = static_cast<int64_t>(rng.uniform_int(6));
    ArgMaxTree t;
    t.build(n, [&](int32_t i) { return keys[i]; });
    ASSERT_EQ(t.first_max(), scan_first_max(keys)) << n;
    for (int step = 0; step < 500; ++step) {
      const auto i = static_cast<int32_t>(rng.uniform_int(static_cast<uint64_t>(n)));
      keys[i] =
          rng.uniform_int(10) == 0 ? ArgMaxTree::kNone : static_cast<int64_t>(rng.uniform_int(6));
      t.update(i, keys[i]);
      ASSERT_EQ(t.first_max(), scan_first_max(keys)) << n << " step " << step;
      ASSERT_EQ(t.key(t.first_max()), keys[scan_first_max(keys)]);
    }
  }
}

}  // namespace
}  // namespace moesim::sim
