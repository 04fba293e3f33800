// Queue isolation: classing and pool choice, the measure-only mode, parser checks, and the
// shipped pair of scenarios (isolated pools vs one shared pool) compared on short-request TTFT.
#include "sim/policy/queue_isolation.h"

#include <gtest/gtest.h>

#include "sim/config/config_error.h"
#include "sim/metrics/run_metrics.h"
#include "tests/sim/policy/fake_policy_context.h"
#include "tests/sim/policy/policy_test_util.h"
#include "tests/sim/serving/test_scenarios.h"

namespace moesim::sim {
namespace {

using testing::FakePolicyContext;

TEST(QueueIsolationTest, ClassesByPromptLengthAndPicksTheClassPool) {
  QueueIsolationParams params;
  params.long_threshold_tokens = 8192;
  params.short_pool = "short";
  params.long_pool = "long";
  QueueIsolationPolicy p{params};
  FakePolicyContext ctx;
  Request s, l;
  s.prompt_tokens = 8191;
  l.prompt_tokens = 8192;
  AdmissionDecision ds, dl;
  p.on_arrival(ctx, s, ds);
  p.on_arrival(ctx, l, dl);
  EXPECT_EQ(ds.pool, "short");
  EXPECT_EQ(dl.pool, "long");
  EXPECT_EQ(ctx.action("class_short"), 1);
  EXPECT_EQ(ctx.action("class_long"), 1);
  RequestRecord rec;
  rec.arrival_ns = 0;
  rec.first_token_ns = from_seconds(0.25);
  p.on_complete(ctx, s, rec);
  p.on_finish(ctx);
  EXPECT_EQ(ctx.metrics.at("queue_isolation.short.completed"), 1);
  EXPECT_DOUBLE_EQ(ctx.metrics.at("queue_isolation.short.ttft_p99_ms"), 250);
  EXPECT_EQ(ctx.metrics.at("queue_isolation.long.completed"), 0);
}

TEST(QueueIsolationTest, MeasureOnlyModeLeavesThePoolAlone) {
  QueueIsolationParams params;
  params.isolate = false;
  QueueIsolationPolicy p{params};
  FakePolicyContext ctx;
  Request l;
  l.prompt_tokens = 20000;
  AdmissionDecision d;
  p.on_arrival(ctx, l, d);
  EXPECT_EQ(d.pool, "");
  EXPECT_EQ(ctx.action("class_long"), 1);
}

TEST(QueueIsolationTest, ParserChecksPools) {
  const std::string pools = testing::kShortLongPools;
  auto make = [&](const std::string& table, const std::string& dep) {
    return make_policies(testing::tiny_scenario("\n[policies.queue_isolation]\n" + table, dep));
  };
  EXPECT_EQ(make("short_pool = \"short\"\nlong_pool = \"long\"\n", pools).size(), 1u);
  EXPECT_EQ(make("isolate = false\n", "").size(), 1u);
  EXPECT_THROW(make("short_pool = \"short\"\nlong_pool = \"short\"\n", pools), ConfigError);
  EXPECT_THROW(make("", pools), ConfigError);  // pools required when isolating
  try {
    make("short_pool = \"short\"\nlong_pool = \"long\"\n", "");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "policies.queue_isolation.short_pool");
    EXPECT_NE(e.reason().find("declared: none"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make("isolate = false\nshort_pool = \"short\"\n", pools), ConfigError);
}

// TTFT (ms) of short requests that got their first token (`completed_only`: that completed).
Percentiles short_ttft_ms(const RunOutput& out, int64_t threshold, bool completed_only) {
  std::vector<double> v;
  for (const RequestRecord& r : out.requests) {
    if (r.prompt_tokens >= threshold || r.ttft_ns() < 0) continue;
    if (completed_only && r.outcome != RequestOutcome::kCompleted) continue;
    v.push_back(static_cast<double>(r.ttft_ns()) / 1e6);
  }
  return percentiles(v);
}

// The shipped pair: the same replicas and traffic, one shared pool vs a short and a long pool.
// Measured, not forced: isolation takes long prefills out of the short requests' queues and
// steps, so short-request TTFT p99 drops (docs/policies/queue_isolation.md has the numbers).
TEST(QueueIsolationTest, IsolationImprovesShortRequestTtftP99OnTheShippedPair) {
  RunOutput shared = testing::run_shipped("scenarios/policies/queue_isolation_shared.toml");
  RunOutput isolated = testing::run_shipped("scenarios/policies/queue_isolation.toml");
  testing::expect_sane_run(shared, "shared");
  testing::expect_sane_run(isolated, "isolated");
  EXPECT_EQ(shared.summary.num_arrived, isolated.summary.num_arrived);
  // Every short request got its first token in both runs (not every one completed in the shared
  // run), so the comparison has no survivor bias.
  const Percentiles s = short_ttft_ms(shared, 8192, false);
  const Percentiles i = short_ttft_ms(isolated, 8192, false);
  ASSERT_GT(s.count, 100);
  EXPECT_EQ(s.count, i.count);
  EXPECT_LT(i.p99, s.p99) << "isolated " << i.p99 << " ms vs shared " << s.p99 << " ms";
  // The policy's own per-class figures (completed requests) agree with the records.
  EXPECT_NEAR(isolated.counters.policy_metrics.at("queue_isolation.short.ttft_p99_ms"),
              short_ttft_ms(isolated, 8192, true).p99, 1e-6);
  EXPECT_NEAR(shared.counters.policy_metrics.at("queue_isolation.short.ttft_p99_ms"),
              short_ttft_ms(shared, 8192, true).p99, 1e-6);
}

}  // namespace
}  // namespace moesim::sim
