// MOESIM_CHECK: a true condition passes through; a false one aborts with file:line, the condition
// and the message.
#include "base/check.h"

#include <gtest/gtest.h>

namespace moesim {
namespace {

int checked_half(int x) {
  MOESIM_CHECK(x % 2 == 0, "odd input");
  return x / 2;
}

TEST(Check, PassesWhenTheConditionHolds) { EXPECT_EQ(checked_half(8), 4); }

TEST(CheckDeathTest, AbortsWithLocationConditionAndMessage) {
  EXPECT_DEATH(checked_half(7),
               "check_test\\.cc:[0-9]+: invariant violated: x % 2 == 0 \\(odd input\\)");
}

}  // namespace
}  // namespace moesim
