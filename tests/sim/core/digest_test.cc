#include "sim/core/digest.h"

#include <gtest/gtest.h>

#include <set>

namespace moesim::sim {
namespace {

TEST(EventDigest, HexIsSixteenLowercaseDigits) {
  EventDigest d;
  d.add_value(1);
  const std::string h = d.hex();
  ASSERT_EQ(h.size(), 16u);
  for (char c : h) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << h;
  EventDigest zero_state;
  EXPECT_EQ(zero_state.hex(), "cbf29ce484222325");
}

TEST(EventDigest, OrderAndEveryFieldMatter) {
  std::set<uint64_t> seen;
  auto digest_of = [](SimTime t, uint32_t k, int64_t a, int64_t b) {
    EventDigest d;
    d.add(t, k, a, b);
    return d.value();
  };
  seen.insert(digest_of(1, 2, 3, 4));
  seen.insert(digest_of(2, 1, 3, 4));
  seen.insert(digest_of(1, 2, 4, 3));
  seen.insert(digest_of(1, 2, 3, 5));
  seen.insert(digest_of(0, 0, 0, 0));
  EXPECT_EQ(seen.size(), 5u);

  EventDigest ab;
  ab.add_value(10);
  ab.add_value(20);
  EventDigest ba;
  ba.add_value(20);
  ba.add_value(10);
  EXPECT_NE(ab.value(), ba.value());
}

// Flipping one input bit flips about half of the output bits (well mixed).
TEST(EventDigest, SingleBitChangesAvalanche) {
  EventDigest base;
  base.add(123456789, 3, 17, 42);
  int total_flipped = 0;
  for (int bit = 0; bit < 64; ++bit) {
    EventDigest d;
    d.add(123456789 ^ (int64_t{1} << bit), 3, 17, 42);
    total_flipped += __builtin_popcountll(d.value() ^ base.value());
  }
  const double mean_flipped = total_flipped / 64.0;
  EXPECT_GT(mean_flipped, 26.0);
  EXPECT_LT(mean_flipped, 38.0);
}

}  // namespace
}  // namespace moesim::sim
