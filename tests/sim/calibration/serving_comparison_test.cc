#include "sim/calibration/serving_comparison.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "sim/calibration/serving_report_writers.h"

namespace moesim::sim {
namespace {

constexpr int64_t kS = 1'000'000'000;

ServedRequest completed(int64_t id, int64_t arrival_ns, double ttft_ms, int64_t done_ns,
                        int64_t generated, std::optional<double> tpot_ms = std::nullopt,
                        int64_t preemptions = 0) {
  ServedRequest r;
  r.request_id = id;
  r.arrival_ns = arrival_ns;
  r.done_ns = done_ns;
  r.generated_tokens = generated;
  r.preemptions = preemptions;
  r.ttft_ms = ttft_ms;
  r.tpot_ms = tpot_ms;
  r.queueing_ms = ttft_ms / 2;
  r.e2e_ms = static_cast<double>(done_ns - arrival_ns) / 1e6;
  return r;
}

// Five requests a second apart with TTFT base + 0, 10, ..., 40 ms, 10 tokens each, TPOT 5 ms,
// done 1 s after arrival.
ServingRun five(const std::string& dir, double base_ttft_ms) {
  ServingRun run;
  run.dir = dir;
  run.trace = "t.jsonl";
  for (int64_t i = 0; i < 5; ++i) {
    run.requests.push_back(
        completed(i, i * kS, base_ttft_ms + 10.0 * static_cast<double>(i), (i + 1) * kS, 10, 5.0));
  }
  return run;
}

double v(const ServingFigures& f, ServingMetric m) {
  return f.values[static_cast<size_t>(m)].value();
}

TEST(ServingFigures, PercentilesThroughputAndRateByHand) {
  ServingRun run = five("a", 10);  // TTFT 10, 20, 30, 40, 50
  // A rejected arrival counts in the offered rate and nowhere else.
  ServedRequest rejected;
  rejected.request_id = 5;
  rejected.outcome = ServedOutcome::kRejected;
  rejected.arrival_ns = 5 * kS;
  run.requests.push_back(rejected);
  run.requests[1].preemptions = 2;
  const ServingFigures f = serving_figures(run);
  EXPECT_EQ(f.num_arrived, 6);
  EXPECT_DOUBLE_EQ(f.offered_rate_per_s, 1.0);  // 5 gaps over 5 s
  // Linear interpolation: p90 at rank 3.6 = 40 + 0.6 * 10, p99 at 3.96 = 40 + 0.96 * 10.
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kTtftP50), 30);
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kTtftP90), 46);
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kTtftP99), 49.6);
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kQueueingP50), 15);
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kTpotP99), 5);
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kE2eP50), 1000);
  // 50 tokens from the first arrival (0) to the last completion (5 s).
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kOutputTokensPerS), 10);
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kPreemptions), 2);
  EXPECT_DOUBLE_EQ(v(f, ServingMetric::kCompleted), 5);
}

TEST(ServingFigures, NoMultiTokenOutputMeansNoTpot) {
  ServingRun run;
  run.requests.push_back(completed(0, 0, 10, kS, 1));
  const ServingFigures f = serving_figures(run);
  EXPECT_FALSE(f.values[static_cast<size_t>(ServingMetric::kTpotP50)].has_value());
  EXPECT_DOUBLE_EQ(f.offered_rate_per_s, 0);  // one arrival: no rate
}

TEST(ServingComparison, ErrorBesideSpreadByHand) {
  LoadPointRuns p;
  p.engine = {five("a", 10), five("b", 20)};  // TTFT p50 30 and 40; p99 49.6 and 59.6
  p.simulated = five("sim", 13);              // p50 33, p99 52.6
  const ServingComparison c = compare_serving({p}, {1000, 100});
  ASSERT_EQ(c.points.size(), 1u);
  const MetricComparison& p50 = c.points[0].metrics[static_cast<size_t>(ServingMetric::kTtftP50)];
  EXPECT_DOUBLE_EQ(p50.engine_mean, 35);
  EXPECT_DOUBLE_EQ(p50.engine_min, 30);
  EXPECT_DOUBLE_EQ(p50.engine_max, 40);
  EXPECT_NEAR(*p50.spread_rel, 5.0 / 35, 1e-12);
  EXPECT_NEAR(*p50.error_rel, -2.0 / 35, 1e-12);
  EXPECT_TRUE(p50.within_spread);
  const MetricComparison& p99 = c.points[0].metrics[static_cast<size_t>(ServingMetric::kTtftP99)];
  EXPECT_NEAR(*p99.error_rel, (52.6 - 54.6) / 54.6, 1e-12);
  // Identical TPOT on every side: no spread, no error, and within it.
  const MetricComparison& tpot = c.points[0].metrics[static_cast<size_t>(ServingMetric::kTpotP50)];
  EXPECT_DOUBLE_EQ(*tpot.spread_rel, 0);
  EXPECT_DOUBLE_EQ(*tpot.error_rel, 0);
  EXPECT_TRUE(tpot.within_spread);
  // Preemptions: a zero mean has no relative error.
  const MetricComparison& pre =
      c.points[0].metrics[static_cast<size_t>(ServingMetric::kPreemptions)];
  EXPECT_FALSE(pre.error_rel.has_value());
  // Every point meets SLOs this loose: the knee is above the highest rate, all points below.
  EXPECT_TRUE(c.measured_knee.above_all);
  EXPECT_TRUE(c.points[0].below_knee);
}

TEST(ServingComparison, OutsideTheSpread) {
  LoadPointRuns p;
  p.engine = {five("a", 10), five("b", 20)};
  p.simulated = five("sim", 25);  // p50 45 > max 40
  const ServingComparison c = compare_serving({p}, {1000, 100});
  const MetricComparison& p50 = c.points[0].metrics[static_cast<size_t>(ServingMetric::kTtftP50)];
  EXPECT_NEAR(*p50.error_rel, 10.0 / 35, 1e-12);
  EXPECT_FALSE(p50.within_spread);
}

TEST(FindKnee, InterpolatesTheMarginBetweenLastPassAndFirstFail) {
  const KneeEstimate k = find_knee({1, 2, 3, 4}, {-0.5, -0.2, 0.3, 0.8});
  ASSERT_TRUE(k.rate_per_s.has_value());
  EXPECT_NEAR(*k.rate_per_s, 2 + 0.2 / 0.5, 1e-12);
  EXPECT_FALSE(k.above_all || k.below_all);
}

TEST(FindKnee, TheFirstCrossingCounts) {
  // A later point that meets the SLOs again (noise past the knee) does not move it.
  const KneeEstimate k = find_knee({1, 2, 3}, {-1.0, 1.0, -0.5});
  EXPECT_NEAR(*k.rate_per_s, 1.5, 1e-12);
}

TEST(FindKnee, Unbracketed) {
  EXPECT_TRUE(find_knee({1, 2}, {-0.1, 0.0}).above_all);  // a margin of 0 meets the SLO
  EXPECT_TRUE(find_knee({1, 2}, {0.1, -0.1}).below_all);
  EXPECT_TRUE(find_knee({1, 2}, {std::nullopt, -0.1}).below_all);
  const KneeEstimate k = find_knee({1, 2}, {-0.1, std::nullopt});  // nothing completed at 2
  EXPECT_DOUBLE_EQ(*k.rate_per_s, 1);
}

// Every request of a run with the same TTFT (its p99) and one output token (no TPOT).
ServingRun flat(const std::string& dir, const std::string& trace, int64_t gap_ns, double ttft_ms) {
  ServingRun run;
  run.dir = dir;
  run.trace = trace;
  for (int64_t i = 0; i < 3; ++i) {
    run.requests.push_back(completed(i, i * gap_ns, ttft_ms, i * gap_ns + kS, 1));
  }
  return run;
}

TEST(ServingComparison, KneeMeasuredVsPredictedAndTheSplit) {
  // TTFT limit 50 ms. Rate 1/s: engine 40 (margin -0.2), simulated 45 (-0.1); rate 2/s: engine
  // 60 (+0.2), simulated 70 (+0.4). Measured knee 1 + 0.2 / 0.4 = 1.5; predicted 1 + 0.1 / 0.5 =
  // 1.2. Points given out of rate order.
  LoadPointRuns fast, slow;
  fast.engine = {flat("e2", "r2", kS / 2, 60)};
  fast.simulated = flat("s2", "r2", kS / 2, 70);
  slow.engine = {flat("e1", "r1", kS, 40)};
  slow.simulated = flat("s1", "r1", kS, 45);
  const ServingComparison c = compare_serving({fast, slow}, {50, 100});
  ASSERT_EQ(c.points.size(), 2u);
  EXPECT_EQ(c.points[0].trace, "r1");
  EXPECT_DOUBLE_EQ(c.points[0].offered_rate_per_s, 1);
  EXPECT_DOUBLE_EQ(c.points[1].offered_rate_per_s, 2);
  EXPECT_NEAR(*c.points[0].measured_slo_margin, -0.2, 1e-12);
  EXPECT_TRUE(c.points[0].measured_meets_slo);
  EXPECT_FALSE(c.points[1].predicted_meets_slo);
  EXPECT_NEAR(*c.measured_knee.rate_per_s, 1.5, 1e-12);
  EXPECT_NEAR(*c.predicted_knee.rate_per_s, 1.2, 1e-12);
  EXPECT_NEAR(*c.knee_error_rel, 1.2 / 1.5 - 1, 1e-12);
  EXPECT_TRUE(c.points[0].below_knee);
  EXPECT_FALSE(c.points[1].below_knee);
  const MetricErrorSplit& s = c.splits[static_cast<size_t>(ServingMetric::kTtftP99)];
  EXPECT_EQ(s.below.num_points, 1);
  EXPECT_NEAR(s.below.mean_error_rel, 0.125, 1e-12);
  EXPECT_EQ(s.above.num_points, 1);
  EXPECT_NEAR(s.above.max_abs_error_rel, 10.0 / 60, 1e-12);
  EXPECT_EQ(s.above.num_within_spread, 0);

  std::ostringstream md, csv;
  write_serving_markdown(md, c);
  EXPECT_NE(md.str().find("measured 1.5 req/s, predicted 1.2 req/s, error -20.0%"),
            std::string::npos)
      << md.str();
  write_serving_points_csv(csv, c);
  EXPECT_NE(csv.str().find("r2,2,above,ttft_p99_ms,ms,1,60,60,60,0,70,0.166666666667,false"),
            std::string::npos)
      << csv.str();
}

}  // namespace
}  // namespace moesim::sim
