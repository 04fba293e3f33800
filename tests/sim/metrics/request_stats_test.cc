#include "sim/metrics/request_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace moesim::sim {
namespace {

// Latency-like samples: lognormal-ish spread over four decades, with exact zeros.
std::vector<double> samples(size_t n) {
  std::vector<double> v;
  uint64_t x = 88172645463325252ull;  // xorshift64: a fixed, platform-independent sequence
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const double u = static_cast<double>(x >> 11) / 9007199254740992.0;
    v.push_back(i % 10 == 0 ? 0.0 : std::exp(10 * u - 5));
  }
  return v;
}

TEST(PercentileSketch, ExactUpToItsSampleLimit) {
  const std::vector<double> v = samples(PercentileSketch::kExactSamples);
  PercentileSketch s;
  for (double x : v) s.add(x);
  ASSERT_TRUE(s.exact());
  const Percentiles a = s.summary(), b = percentiles(v);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.p50, b.p50);
  EXPECT_EQ(a.p90, b.p90);
  EXPECT_EQ(a.p99, b.p99);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.max, b.max);
}

// Beyond the limit: each percentile within 2^-11 of the exact one, mean and max exact (the mean
// up to summation order), zeros stay zero.
TEST(PercentileSketch, BucketsStayWithinTheirRelativeBound) {
  const std::vector<double> v = samples(4 * PercentileSketch::kExactSamples + 17);
  PercentileSketch s;
  for (double x : v) s.add(x);
  ASSERT_FALSE(s.exact());
  const Percentiles a = s.summary(), b = percentiles(v);
  EXPECT_EQ(a.count, b.count);
  for (auto [got, want] : {std::pair{a.p50, b.p50}, {a.p90, b.p90}, {a.p99, b.p99}}) {
    EXPECT_LE(std::abs(got - want), want * std::ldexp(1.0, -11)) << got << " vs " << want;
    EXPECT_NE(got, want);  // really bucketed (the test would pass vacuously otherwise)
  }
  EXPECT_NEAR(a.mean, b.mean, b.mean * 1e-12);
  EXPECT_EQ(a.max, b.max);
  PercentileSketch mostly_zero;
  for (size_t i = 0; i < 2 * PercentileSketch::kExactSamples; ++i) mostly_zero.add(i % 10 ? 0 : 5);
  EXPECT_EQ(mostly_zero.summary().p50, 0.0);
}

// The summary from streamed statistics equals the one from a vector of records.
TEST(RequestStats, StreamedSummaryEqualsTheVectorOne) {
  std::vector<RequestRecord> recs;
  for (int32_t i = 0; i < 50; ++i) {
    RequestRecord r;
    r.request_id = i;
    r.arrival_ns = i * 1000000;
    r.outcome = i % 7 == 0 ? RequestOutcome::kRejected
                           : (i % 5 == 0 ? RequestOutcome::kInFlight : RequestOutcome::kCompleted);
    if (r.outcome == RequestOutcome::kCompleted) {
      r.first_scheduled_ns = r.arrival_ns + 1000 * i;
      r.first_token_ns = r.first_scheduled_ns + 500000;
      r.done_ns = r.first_token_ns + 3000000 + 17 * i;
      r.generated_tokens = 1 + i % 4;
    }
    r.prompt_tokens = 100 + i;
    recs.push_back(r);
  }
  const SimTime end = 60000000;
  RequestStats stats(1.0, 2.0);
  for (const RequestRecord& r : recs) stats.add(r, end);
  const RunSummary a = summarize(stats, {}, RunCounters{}, end);
  const RunSummary b = summarize(recs, {}, RunCounters{}, end, 1.0, 2.0);
  EXPECT_EQ(a.num_completed, b.num_completed);
  EXPECT_EQ(a.num_rejected, b.num_rejected);
  EXPECT_EQ(a.num_in_flight, b.num_in_flight);
  EXPECT_EQ(a.num_waiting_first_token, b.num_waiting_first_token);
  EXPECT_EQ(a.max_wait_first_token_ms, b.max_wait_first_token_ms);
  EXPECT_EQ(a.slo.num_met, b.slo.num_met);
  EXPECT_EQ(a.slo.num_decided, b.slo.num_decided);
  EXPECT_EQ(a.ttft_ms.p99, b.ttft_ms.p99);
  EXPECT_EQ(a.tpot_ms.mean, b.tpot_ms.mean);
  EXPECT_EQ(a.e2e_ms.max, b.e2e_ms.max);
  EXPECT_GT(a.num_rejected, 0);
  EXPECT_GT(a.num_in_flight, 0);
}

}  // namespace
TEST(PercentileSketch, MergedSketchesMatchOneSketch) {
  const std::vector<double> v = samples(3000);
  PercentileSketch whole, a, b;
  for (size_t i = 0; i < v.size(); ++i) {
    whole.add(v[i]);
    (i < 1000 ? a : b).add(v[i]);
  }
  a.merge(b);
  const Percentiles pw = whole.summary(), pm = a.summary();
  EXPECT_TRUE(a.exact());
  EXPECT_EQ(pm.count, pw.count);
  EXPECT_EQ(pm.p50, pw.p50);
  EXPECT_EQ(pm.p99, pw.p99);
  EXPECT_EQ(pm.max, pw.max);
  // Past the exact limit the merge folds into the same buckets one sketch would use.
  const std::vector<double> big = samples(PercentileSketch::kExactSamples + 10);
  PercentileSketch one, x, y;
  for (size_t i = 0; i < big.size(); ++i) {
    one.add(big[i]);
    (i % 2 == 0 ? x : y).add(big[i]);
  }
  x.merge(y);
  EXPECT_FALSE(x.exact());
  EXPECT_EQ(x.summary().p90, one.summary().p90);
  EXPECT_EQ(x.summary().p99, one.summary().p99);
}

// Kaplan-Meier by hand: observed 1, 2, 3, 4 and one value censored at 2.5. S drops to 4/5 at 1,
// 3/5 at 2 (4 at risk), 3/10 at 3 (2 at risk: the censored one left), 0 at 4.
TEST(PercentileSketch, KaplanMeierQuantilesWithCensoredValues) {
  PercentileSketch s;
  for (double x : {1.0, 2.0, 3.0, 4.0}) s.add(x);
  const Percentiles p = s.summary_with_censored({2.5});
  EXPECT_EQ(p.num_censored, 1);
  EXPECT_EQ(p.count, 4);
  EXPECT_EQ(p.p50, 3.0);  // F = 0.4 at 2, 0.7 at 3
  EXPECT_EQ(p.p90, 4.0);
  EXPECT_EQ(p.p99, 4.0);
  EXPECT_FALSE(p.lower_bound.p99);
  EXPECT_EQ(p.mean, 2.5);  // over the observed values
  // Without censored values: the usual interpolated percentiles.
  EXPECT_EQ(s.summary_with_censored({}).p50, 2.5);
}

TEST(PercentileSketch, QuantilesBeyondTheEstimateAreLowerBounds) {
  // One served request in 1 ms, two still waiting after 5 and 6 ms: F reaches only 1/3.
  PercentileSketch s;
  s.add(1.0);
  const Percentiles p = s.summary_with_censored({6.0, 5.0});
  EXPECT_TRUE(p.lower_bound.p50 && p.lower_bound.p90 && p.lower_bound.p99);
  EXPECT_EQ(p.p50, 6.0);
  EXPECT_EQ(p.p99, 6.0);
  // Nothing observed at all: every quantile is the longest wait, as a bound.
  const Percentiles none = PercentileSketch().summary_with_censored({3.0});
  EXPECT_EQ(none.count, 0);
  EXPECT_TRUE(none.lower_bound.p50);
  EXPECT_EQ(none.p50, 3.0);
}

TEST(RequestStats, CensoredRequestsEnterTheirPercentilesAndMisses) {
  RequestStats st(/*ttft*/ 100, /*tpot*/ 10);
  const SimTime end = from_seconds(10.0);
  RequestRecord waiting;  // no first token after 2 s: TTFT censored at 2,000 ms, missed
  waiting.arrival_ns = from_seconds(8.0);
  waiting.output_tokens = 10;
  st.add(waiting, end);
  RequestRecord decoding;  // first token at 9.95 s, 11 tokens asked: TPOT >= 50 ms / 10 = 5 ms
  decoding.arrival_ns = from_seconds(9.9);
  decoding.first_scheduled_ns = from_seconds(9.9);
  decoding.first_token_ns = from_seconds(9.95);
  decoding.output_tokens = 11;
  st.add(decoding, end);
  RequestRecord slow = decoding;  // 3 tokens asked, decoding for 50 ms: TPOT >= 25 ms > 10
  slow.output_tokens = 3;
  st.add(slow, end);
  EXPECT_EQ(st.censored_ttft_ms(), std::vector<double>({2000.0}));
  ASSERT_EQ(st.censored_tpot_ms().size(), 2u);
  EXPECT_NEAR(st.censored_tpot_ms()[0], 5.0, 1e-9);
  EXPECT_NEAR(st.censored_tpot_ms()[1], 25.0, 1e-9);
  EXPECT_EQ(st.censored_queueing_ms(), std::vector<double>({2000.0}));
  EXPECT_EQ(st.slo().num_met, 0);
  EXPECT_EQ(st.slo().num_decided, 2);  // the starved one and the slow decoder
  const RunSummary s = summarize(st, {}, RunCounters{}, end);
  EXPECT_EQ(s.ttft_ms.num_censored, 1);
  EXPECT_EQ(s.ttft_ms.count, 2);
  EXPECT_TRUE(s.ttft_ms.lower_bound.p99);
  EXPECT_EQ(s.ttft_ms.p99, 2000.0);
}

}  // namespace moesim::sim
