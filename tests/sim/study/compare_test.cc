#include "sim/study/compare.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/study/overrides.h"
#include "sim/study/simulate.h"

namespace moesim::sim::study {
namespace {

const std::string kScenario = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

const MetricComparison& metric(const CompareResult& r, const std::string& name) {
  for (const MetricComparison& m : r.metrics) {
    if (m.metric == name) return m;
  }
  ADD_FAILURE() << "no metric " << name;
  return r.metrics.front();
}

TEST(Compare, AScenarioAgainstItselfDiffersByNothing) {
  Scenario a = load_scenario(kScenario);
  CompareOptions opt;
  opt.seed = 5;
  opt.num_resamples = 200;
  opt.num_threads = 2;
  CompareResult r = compare_scenarios(a, a, opt);
  EXPECT_EQ(r.method, "requests");
  EXPECT_GT(r.num_requests_a, 0);
  EXPECT_EQ(r.num_matched, r.num_requests_a);
  EXPECT_EQ(r.num_identical, r.num_matched);
  EXPECT_EQ(r.digests_a, r.digests_b);
  EXPECT_TRUE(r.conservation_ok);
  EXPECT_TRUE(r.identical);
  ASSERT_EQ(r.metrics.size(), 9u);
  for (const MetricComparison& m : r.metrics) {
    EXPECT_EQ(m.diff, 0) << m.metric;
    EXPECT_EQ(m.rel_diff, 0) << m.metric;
    // Every resample gives 0: a zero-width interval says nothing of the noise, none is shown.
    EXPECT_FALSE(m.has_ci) << m.metric;
    EXPECT_EQ(m.difference_only, m.metric == "ttft_paired_mean_diff_ms") << m.metric;
  }
  EXPECT_EQ(metric(r, "ttft_p99_ms").unit, "ms");
  EXPECT_EQ(metric(r, "output_tokens_per_s").unit, "tokens/s");
  EXPECT_EQ(metric(r, "goodput_req_per_s").unit, "requests/s");
  EXPECT_EQ(metric(r, "slo_attainment").unit, "fraction");
}

// Figures without samples are NaN (printed n/a), and so are their differences and intervals.
TEST(Compare, FiguresWithoutSamplesHaveNoDifference) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  Scenario a = t.instantiate(std::vector<Override>{{"run.duration_s", 0.0005}});  // none completes
  Scenario b = t.instantiate({});
  CompareOptions opt;
  opt.seed = 5;
  opt.num_resamples = 100;
  CompareResult r = compare_scenarios(a, b, opt);
  const MetricComparison& tpot = metric(r, "tpot_p50_ms");
  EXPECT_TRUE(std::isnan(tpot.a));
  EXPECT_FALSE(std::isnan(tpot.b));
  EXPECT_TRUE(std::isnan(tpot.diff));
  EXPECT_TRUE(std::isnan(tpot.rel_diff));
  EXPECT_FALSE(tpot.has_ci);
  EXPECT_FALSE(std::isnan(metric(r, "output_tokens_per_s").diff));
  for (const MetricComparison& m : r.metrics) {
    if (m.has_ci) {
      EXPECT_LE(m.ci_lo, m.ci_hi) << m.metric;
    }
  }
}

TEST(Compare, CommonRandomNumbersAndSummaryFigures) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  Scenario a = t.instantiate({});
  Scenario b = t.instantiate(std::vector<Override>{{"scheduler.max_seqs", int64_t{1}}});
  CompareOptions opt;
  opt.seed = 5;
  opt.num_resamples = 300;
  CompareResult r = compare_scenarios(a, b, opt);
  // Same workload, same seed: every request arrives identically in both runs.
  EXPECT_EQ(r.num_identical, r.num_matched);
  EXPECT_EQ(r.num_matched, r.num_requests_a);
  RunSummary sa = simulate(a, 5).summary, sb = simulate(b, 5).summary;
  EXPECT_EQ(metric(r, "ttft_p99_ms").a, sa.ttft_ms.p99);
  EXPECT_EQ(metric(r, "ttft_p99_ms").b, sb.ttft_ms.p99);
  EXPECT_EQ(metric(r, "ttft_p99_ms").diff, sb.ttft_ms.p99 - sa.ttft_ms.p99);
  EXPECT_EQ(metric(r, "output_tokens_per_s").a, sa.output_tokens_per_s);
  EXPECT_EQ(metric(r, "goodput_req_per_s").b, sb.slo.goodput_req_per_s);
  EXPECT_EQ(metric(r, "slo_attainment").a, sa.slo.attainment);
  // One sequence at a time queues: the paired TTFT difference is positive and so is its interval.
  const MetricComparison& paired = metric(r, "ttft_paired_mean_diff_ms");
  EXPECT_GT(paired.diff, 0);
  EXPECT_GT(paired.ci_lo, 0);
  EXPECT_LE(paired.ci_lo, paired.diff);
  EXPECT_GE(paired.ci_hi, paired.diff);
  for (const MetricComparison& m : r.metrics) EXPECT_LE(m.ci_lo, m.ci_hi) << m.metric;
}

TEST(Compare, ReplicationsAreMeansOverSeeds) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  Scenario a = t.instantiate(std::vector<Override>{{"run.duration_s", 0.6}});
  Scenario b = t.instantiate(
      std::vector<Override>{{"run.duration_s", 0.6}, {"scheduler.max_seqs", int64_t{2}}});
  CompareOptions opt;
  opt.seed = 20;
  opt.num_replications = 3;
  opt.num_resamples = 200;
  opt.num_threads = 2;
  CompareResult r = compare_scenarios(a, b, opt);
  EXPECT_EQ(r.method, "replications");
  EXPECT_EQ(r.seeds, (std::vector<uint64_t>{20, 21, 22}));
  double mean_a = 0, mean_b = 0;
  for (uint64_t s : r.seeds) {
    mean_a += simulate(a, s).summary.tpot_ms.p50 / 3;
    mean_b += simulate(b, s).summary.tpot_ms.p50 / 3;
  }
  EXPECT_NEAR(metric(r, "tpot_p50_ms").a, mean_a, 1e-9);
  EXPECT_NEAR(metric(r, "tpot_p50_ms").b, mean_b, 1e-9);
  EXPECT_NEAR(metric(r, "tpot_p50_ms").diff, mean_b - mean_a, 1e-9);
  // Deterministic whatever the thread count.
  opt.num_threads = 1;
  CompareResult again = compare_scenarios(a, b, opt);
  for (size_t i = 0; i < r.metrics.size(); ++i) {
    EXPECT_EQ(r.metrics[i].ci_lo, again.metrics[i].ci_lo);
    EXPECT_EQ(r.metrics[i].ci_hi, again.metrics[i].ci_hi);
  }
}

}  // namespace
}  // namespace moesim::sim::study
