#include "sim/workload/request.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

TEST(Request, PrefixBlocksRoundUp) {
  EXPECT_EQ(num_prefix_blocks(0), 0);
  EXPECT_EQ(num_prefix_blocks(1), 1);
  EXPECT_EQ(num_prefix_blocks(512), 1);
  EXPECT_EQ(num_prefix_blocks(513), 2);
  EXPECT_EQ(num_prefix_blocks(6758), 14);  // first row of the Mooncake conversation trace
}

TEST(Request, LengthClassBoundaries) {
  EXPECT_EQ(length_class(1), LengthClass::kShort);
  EXPECT_EQ(length_class(kMediumPromptTokens - 1), LengthClass::kShort);
  EXPECT_EQ(length_class(kMediumPromptTokens), LengthClass::kMedium);
  EXPECT_EQ(length_class(kLongPromptTokens - 1), LengthClass::kMedium);
  EXPECT_EQ(length_class(kLongPromptTokens), LengthClass::kLong);
  EXPECT_EQ(length_class_name(LengthClass::kLong), "long");
}

TEST(Request, DomainNames) {
  EXPECT_EQ(domain_name(Domain::kCode), "code");
  EXPECT_EQ(domain_name(Domain::kMath), "math");
  EXPECT_EQ(domain_name(Domain::kChat), "chat");
  EXPECT_EQ(domain_name(Domain::kMultilingual), "multilingual");
}

TEST(Request, DefaultsAreAnIndependentRequest) {
  Request r;
  EXPECT_FALSE(r.session.valid());
  EXPECT_FALSE(r.id.valid());
  EXPECT_EQ(r.turn_idx, 0);
  EXPECT_EQ(r.attempt_idx, 0);
  EXPECT_EQ(r.reused_prefix_tokens, 0);
}

}  // namespace
}  // namespace moesim::sim
