// Op-kind names are shared with the engine's measurement schema: they must round-trip.
#include "sim/cost/op_work.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace moesim::sim {
namespace {

TEST(OpWorkTest, NamesRoundTripAndAreDistinct) {
  std::set<std::string> names;
  for (int i = 0; i < kNumOpKinds; ++i) {
    OpKind k = static_cast<OpKind>(i);
    std::string name(op_kind_name(k));
    EXPECT_FALSE(name.empty());
    names.insert(name);
    ASSERT_TRUE(op_kind_from_name(name).has_value()) << name;
    EXPECT_EQ(*op_kind_from_name(name), k);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumOpKinds));
  EXPECT_EQ(op_kind_name(OpKind::kCombineA2a), "combine_a2a");
  EXPECT_EQ(op_kind_name(OpKind::kExpertFfn), "expert_ffn");
}

TEST(OpWorkTest, UnknownNameIsNullopt) {
  EXPECT_FALSE(op_kind_from_name("attn_mla").has_value());
  EXPECT_FALSE(op_kind_from_name("").has_value());
  EXPECT_FALSE(op_kind_from_name("Expert_FFN").has_value());
}

TEST(OpWorkTest, EmptyMeansNoTokensFlopsOrBytes) {
  OpWork w;
  EXPECT_TRUE(w.empty());
  w.bytes = 1;
  EXPECT_FALSE(w.empty());
}

}  // namespace
}  // namespace moesim::sim
