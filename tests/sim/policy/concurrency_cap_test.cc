// Concurrency cap: limits set on every replica, parser checks, and the shipped pair of
// scenarios (cap 32 vs 128 per replica) compared on TPOT.
#include "sim/policy/concurrency_cap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "sim/config/config_error.h"
#include "tests/sim/policy/fake_policy_context.h"
#include "tests/sim/policy/policy_test_util.h"
#include "tests/sim/serving/test_scenarios.h"

namespace moesim::sim {
namespace {

using testing::FakePolicyContext;

TEST(ConcurrencyCapTest, SetsTheLimitsOfEveryReplica) {
  ConcurrencyCapPolicy p{ConcurrencyCapParams{32, 4096}};
  FakePolicyContext ctx(3);
  p.on_start(ctx);
  ASSERT_EQ(ctx.limits.size(), 3u);
  for (const auto& [replica, limit] : ctx.limits) {
    EXPECT_EQ(limit.first, 32);
    EXPECT_EQ(limit.second, 4096);
  }
  EXPECT_EQ(ctx.action("cap_set"), 3);
  EXPECT_EQ(ctx.metrics.at("concurrency_cap.cluster_max_seqs"), 96);
}

TEST(ConcurrencyCapTest, ParserNeedsALimit) {
  EXPECT_THROW(make_policies(testing::tiny_scenario("\n[policies.concurrency_cap]\n")),
               ConfigError);
  EXPECT_EQ(make_policies(testing::tiny_scenario(
                              "\n[policies.concurrency_cap]\nmax_step_tokens_per_replica = 64\n"))
                .size(),
            1u);
}

// The cap holds in every step: with a cap of 1 no step of either replica runs two sequences,
// while the same traffic without the cap does.
TEST(ConcurrencyCapTest, NoStepRunsMoreSequencesThanTheCap) {
  // 20 requests in about 20 ms.
  Scenario sc =
      testing::tiny_scenario("\n[policies.concurrency_cap]\nmax_seqs_per_replica = 1\n", "", 1000);
  RunOptions opt = testing::keeping_requests();
  opt.record_steps = true;
  opt.record_max_steps = 1'000'000;
  auto most_seqs = [](const RunOutput& out) {
    size_t most = 0;
    for (const StepRecord& s : out.steps) most = std::max(most, s.seqs.size());
    return most;
  };
  RunOutput capped = run_scenario(sc, opt, -1, make_policies(sc));
  RunOutput free = run_scenario(sc, opt, -1, {});
  testing::expect_sane_run(capped, "cap 1");
  EXPECT_EQ(most_seqs(capped), 1u);
  EXPECT_GT(most_seqs(free), 1u);
  EXPECT_EQ(capped.counters.actions.at("cap_set"), 2);
  EXPECT_GT(capped.summary.queueing_ms.mean, free.summary.queueing_ms.mean);
}

// The shipped pair (docs/policies/concurrency_cap.md): the same deployment and traffic with a cap
// of 32 and of 128 sequences per replica. Smaller steps carry fewer all-to-all bytes and wait
// less at each barrier, so TPOT drops with the smaller cap; requests queue for a slot instead.
TEST(ConcurrencyCapTest, CapOf32LowersTpotAgainst128OnTheShippedPair) {
  RunOutput c32 = testing::run_shipped("scenarios/policies/concurrency_cap_32.toml");
  RunOutput c128 = testing::run_shipped("scenarios/policies/concurrency_cap_128.toml");
  testing::expect_sane_run(c32, "cap 32");
  testing::expect_sane_run(c128, "cap 128");
  EXPECT_EQ(c32.summary.num_arrived, c128.summary.num_arrived);
  EXPECT_LT(c32.summary.tpot_ms.p50, c128.summary.tpot_ms.p50);
  EXPECT_LT(c32.summary.tpot_ms.p99, c128.summary.tpot_ms.p99);
  // The price: requests wait for a slot.
  EXPECT_GT(c32.summary.queueing_ms.p99, c128.summary.queueing_ms.p99);
}

}  // namespace
}  // namespace moesim::sim
