// Long-context cap: accuracy interpolation, each action (reject, summarise, route, offline),
// parser checks, and the shipped scenario.
#include "sim/policy/long_context_cap.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/config/config_error.h"
#include "tests/sim/policy/fake_policy_context.h"
#include "tests/sim/policy/policy_test_util.h"
#include "tests/sim/serving/test_scenarios.h"

namespace moesim::sim {
namespace {

using testing::FakePolicyContext;

Request long_request(int32_t id, int64_t prompt_tokens) {
  Request r;
  r.id = RequestId(id);
  r.prompt_tokens = prompt_tokens;
  r.output_tokens = 100;
  for (int64_t b = 0; b < num_prefix_blocks(prompt_tokens); ++b) {
    r.prefix_block_hashes.push_back(static_cast<uint64_t>(b));
  }
  return r;
}

TEST(LongContextCapTest, AccuracyInterpolatesInLogContextAndIsFlatOutside) {
  LongContextCapPolicy p{LongContextCapParams{}};
  EXPECT_DOUBLE_EQ(p.expected_accuracy(32768), 0.94);
  EXPECT_DOUBLE_EQ(p.expected_accuracy(524288), 0.33);
  // 128K lies halfway between 32K and 512K in log2 (15, 17, 19).
  EXPECT_NEAR(p.expected_accuracy(131072), (0.94 + 0.33) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(p.expected_accuracy(1000), 0.94);
  EXPECT_DOUBLE_EQ(p.expected_accuracy(1 << 21), 0.33);
}

TEST(LongContextCapTest, RejectsOverTheThresholdOnly) {
  LongContextCapParams params;
  params.threshold_tokens = 1000;
  LongContextCapPolicy p{params};
  FakePolicyContext ctx;
  Request ok = long_request(0, 1000);
  AdmissionDecision d;
  p.on_arrival(ctx, ok, d);
  EXPECT_FALSE(d.reject);
  Request over = long_request(1, 1001);
  p.on_arrival(ctx, over, d);
  EXPECT_TRUE(d.reject);
  EXPECT_EQ(d.reject_reason, "long_context");
  EXPECT_EQ(ctx.action("long_context_over"), 1);
  // Only completed requests enter the accuracy distribution.
  RequestRecord rec;
  p.on_complete(ctx, ok, rec);
  p.on_complete(ctx, over, rec);
  p.on_finish(ctx);
  EXPECT_EQ(ctx.metrics.at("long_context_cap.expected_accuracy_count"), 1);
  EXPECT_DOUBLE_EQ(ctx.metrics.at("long_context_cap.expected_accuracy_mean"), 0.94);
  EXPECT_EQ(ctx.metrics.at("long_context_cap.requests_over_threshold"), 1);
}

TEST(LongContextCapTest, SummarisesToTheCapWithAPreprocessingDelay) {
  LongContextCapParams params;
  params.threshold_tokens = 131072;
  params.action = LongContextAction::kSummarize;
  params.summary_tokens = 65536;
  params.preprocess_tokens_per_s = 100000;
  params.summary_accuracy_factor = 0.9;
  LongContextCapPolicy p{params};
  FakePolicyContext ctx;
  Request r = long_request(3, 400000);
  r.reused_prefix_tokens = 1024;
  AdmissionDecision d;
  p.on_arrival(ctx, r, d);
  EXPECT_FALSE(d.reject);
  EXPECT_EQ(d.delay_ns, from_seconds(4.0));  // 400000 tokens read at 100000 per second
  EXPECT_EQ(r.prompt_tokens, 65536);
  EXPECT_EQ(r.reused_prefix_tokens, 0);
  ASSERT_EQ(r.prefix_block_hashes.size(), 128u);
  for (uint64_t h : r.prefix_block_hashes) EXPECT_GE(h, uint64_t{1} << 63);
  EXPECT_EQ(ctx.action("long_context_summarize"), 1);
  p.on_complete(ctx, r, RequestRecord{});
  p.on_finish(ctx);
  EXPECT_NEAR(ctx.metrics.at("long_context_cap.expected_accuracy_mean"),
              0.9 * p.expected_accuracy(65536), 1e-12);
}

TEST(LongContextCapTest, RoutesAndBatchesOffline) {
  LongContextCapParams params;
  params.threshold_tokens = 1000;
  params.action = LongContextAction::kRoute;
  params.pool = "long";
  params.short_pool = "short";
  LongContextCapPolicy route{params};
  FakePolicyContext ctx;
  Request a = long_request(0, 500), b = long_request(1, 5000);
  AdmissionDecision da, db;
  route.on_arrival(ctx, a, da);
  route.on_arrival(ctx, b, db);
  EXPECT_EQ(da.pool, "short");
  EXPECT_EQ(db.pool, "long");
  EXPECT_EQ(db.delay_ns, 0);
  EXPECT_EQ(b.prompt_tokens, 5000);

  params.action = LongContextAction::kOffline;
  params.batch_interval_s = 10;
  LongContextCapPolicy offline{params};
  ctx.now_ns = from_seconds(23.5);
  Request c = long_request(2, 5000);
  AdmissionDecision dc;
  offline.on_arrival(ctx, c, dc);
  EXPECT_EQ(dc.pool, "long");
  EXPECT_EQ(dc.delay_ns, from_seconds(6.5));  // released at the 30 s batch window
  EXPECT_EQ(ctx.action("long_context_offline"), 1);
}

TEST(LongContextCapTest, ParserChecksPoolsAndTable) {
  const std::string pools = testing::kShortLongPools;
  auto make = [&](const std::string& table, bool with_pools = true) {
    return make_policies(
        testing::tiny_scenario("\n[policies.long_context_cap]\n" + table, with_pools ? pools : ""));
  };
  EXPECT_EQ(make("action = \"route\"\npool = \"long\"\nshort_pool = \"short\"\n").size(), 1u);
  EXPECT_EQ(make("", false).size(), 1u);
  try {
    make("action = \"route\"\npool = \"huge\"\nshort_pool = \"short\"\n");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "policies.long_context_cap.pool");
    EXPECT_NE(e.reason().find("declared: short, long"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make("action = \"route\"\npool = \"long\"\n"), ConfigError);  // short_pool
  EXPECT_THROW(make("summary_tokens = 10\n", false), ConfigError);           // only with summarize
  EXPECT_THROW(make("accuracy_context_tokens = [1000, 500]\naccuracy = [0.9, 0.8]\n", false),
               ConfigError);
  EXPECT_THROW(make("accuracy_context_tokens = [1000]\naccuracy = [1.2]\n", false), ConfigError);
  EXPECT_THROW(make("accuracy = [0.9]\n", false), ConfigError);
  EXPECT_THROW(make("action = \"summarize\"\nsummary_tokens = 200000\n", false), ConfigError);
}

// The shipped scenario: long prompts go to the long-context pool, requests are conserved and
// the accuracy distribution is reported.
TEST(LongContextCapTest, ShippedScenarioRoutesLongPromptsToTheirPool) {
  RunOutput out = testing::run_shipped("scenarios/policies/long_context_cap.toml");
  testing::expect_sane_run(out, "long_context_cap.toml");
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/policies/long_context_cap.toml");
  const int32_t first_long = sc.deployment.pools.front().num_replicas;
  int64_t long_seen = 0;
  for (const RequestRecord& r : out.requests) {
    if (r.replica < 0) continue;
    if (r.prompt_tokens > 131072) {
      ++long_seen;
      EXPECT_GE(r.replica, first_long);
    } else {
      EXPECT_LT(r.replica, first_long);
    }
  }
  EXPECT_GT(long_seen, 0);
  const auto& m = out.counters.policy_metrics;
  EXPECT_GT(m.at("long_context_cap.expected_accuracy_count"), 0);
  EXPECT_LE(m.at("long_context_cap.expected_accuracy_p10"),
            m.at("long_context_cap.expected_accuracy_p50"));
}

}  // namespace
}  // namespace moesim::sim
