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
}  // namespace moesim::sim
