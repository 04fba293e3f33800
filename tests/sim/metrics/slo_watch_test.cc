#include "sim/metrics/slo_watch.h"

#include <gtest/gtest.h>

#include <vector>

#include "sim/metrics/request_stats.h"

namespace moesim::sim {
namespace {

// The threshold is the summary's percentile rule: k samples above the limit put percentile q of
// every n in [k, n_max] samples above it, and k - 1 samples just above it, the rest far below,
// do not at n_max (the interpolation then stays at the limit or under).
TEST(SloWatch, ThresholdIsThePercentilesRuleForEveryFinalCount) {
  const double limit = 10;
  for (double q : {0.5, 0.9, 0.99}) {
    for (int64_t n_max = 1; n_max <= 300; ++n_max) {
      const int64_t k = SloWatch::samples_above_for_certain(q, n_max);
      ASSERT_GE(k, 1);
      ASSERT_LE(k, n_max);
      auto pct = [&](int64_t above, int64_t n) {
        std::vector<double> v(static_cast<size_t>(n), 0.0);
        for (int64_t i = 0; i < above; ++i) v[static_cast<size_t>(i)] = limit + 1e-8;
        const Percentiles p = percentiles(v);
        return q == 0.5 ? p.p50 : q == 0.9 ? p.p90 : p.p99;
      };
      for (int64_t n = k; n <= n_max; ++n) {
        ASSERT_GT(pct(k, n), limit) << "q " << q << " n_max " << n_max << " n " << n;
      }
      ASSERT_LE(pct(k - 1, n_max), limit) << "q " << q << " n_max " << n_max;
    }
  }
}

RequestRecord record(double arrival_s, double first_s, double done_s, int64_t tokens) {
  RequestRecord r;
  r.arrival_ns = from_seconds(arrival_s);
  r.first_token_ns = first_s >= 0 ? from_seconds(first_s) : -1;
  r.done_ns = done_s >= 0 ? from_seconds(done_s) : -1;
  r.generated_tokens = tokens;
  r.outcome = done_s >= 0 ? RequestOutcome::kCompleted : RequestOutcome::kInFlight;
  return r;
}

SloWatchLimits ttft_p99(double limit_ms) {
  SloWatchLimits w;
  w.percentiles.push_back({"ttft_p99_ms", SloWatchLimits::Metric::kTtft, 0.99, limit_ms});
  w.ttft_ms = 1e9;
  w.tpot_ms = 1e9;
  return w;
}

TEST(SloWatch, DecidesAPercentileAtTheLastSampleNeeded) {
  // 300 requests at most: p99 is above the limit once 300 - floor(0.99 x 299) = 4 are.
  SloWatch w(ttft_p99(1000), 300);
  EXPECT_EQ(SloWatch::samples_above_for_certain(0.99, 300), 4);
  for (int i = 0; i < 3; ++i) {
    w.on_first_token(record(0, 1.5, -1, 0), from_seconds(1.5));
    w.on_first_token(record(0, 0.5, -1, 0), from_seconds(1.5));  // within the limit
  }
  EXPECT_FALSE(w.failed());
  w.on_first_token(record(0, 2.0, -1, 0), from_seconds(2.0));
  ASSERT_TRUE(w.failed());
  EXPECT_EQ(w.failure(),
            "ttft_p99_ms > 1000 (decided early at 2.000 s: 4 samples above the limit, of at most "
            "300 requests)");
  // A sample exactly at the limit is not above it (the judged percentile compares with >).
  SloWatch at(ttft_p99(1000), 1);
  at.on_first_token(record(0, 1.0, -1, 0), from_seconds(1.0));
  EXPECT_FALSE(at.failed());
}

TEST(SloWatch, DecidesTheAttainmentFromMissedRequests) {
  SloWatchLimits lim;
  lim.ttft_ms = 100;
  lim.tpot_ms = 10;
  lim.min_attainment = 0.99;
  // At most 200 requests: 2 missed still allow 198 / 200 = 0.99; a third does not.
  SloWatch w(lim, 200);
  w.on_reject(record(0, -1, -1, 0), from_seconds(0.1));
  w.on_first_token(record(0, 0.2, -1, 0), from_seconds(0.2));  // late first token: missed
  // Completed, TPOT 20 ms beyond 10 ms, but its first token was late: counted once, then.
  w.on_complete(record(0, 0.2, 0.4, 11), from_seconds(0.4));
  EXPECT_FALSE(w.failed());
  // First token in time, TPOT 20 ms: missed at completion.
  w.on_first_token(record(1, 1.05, -1, 0), from_seconds(1.05));
  EXPECT_FALSE(w.failed());
  w.on_complete(record(1, 1.05, 1.25, 11), from_seconds(1.25));
  ASSERT_TRUE(w.failed());
  EXPECT_EQ(w.failure(),
            "attainment < 0.99 (decided early at 1.250 s: 3 requests missed, of at most 200)");
  // Without a minimum the attainment is not watched.
  lim.min_attainment = 0;
  SloWatch none(lim, 1);
  none.on_reject(record(0, -1, -1, 0), 0);
  EXPECT_FALSE(none.failed());
}

TEST(SloWatch, CountsOnlyRequestsArrivingAfterTheLatestWarmUpCut) {
  SloWatchLimits lim;
  lim.ttft_ms = 100;
  lim.tpot_ms = 1e9;
  lim.min_attainment = 0.5;
  // At most 2 requests, measured from 1 s on: the early one's miss may fall in the warm-up.
  SloWatch w(lim, 2, from_seconds(1.0));
  w.on_reject(record(0.5, -1, -1, 0), from_seconds(0.5));
  w.on_first_token(record(0.6, 0.9, -1, 0), from_seconds(0.9));
  EXPECT_FALSE(w.failed());
  w.on_reject(record(1.0, -1, -1, 0), from_seconds(1.0));
  EXPECT_FALSE(w.failed());  // 1 of at most 2 missed: 0.5 can still be met
  w.on_first_token(record(1.1, 1.5, -1, 0), from_seconds(1.5));
  EXPECT_TRUE(w.failed());
}

// A queued request that has waited past a TTFT limit without a first token is above it whatever
// follows (a later first token, or in flight at the end, censored above it): counted then, and
// not again at its first token.
TEST(SloWatch, CountsAWaitPastTheTtftLimitOnce) {
  SloWatchLimits lim;
  SloWatchLimits::Percentile p99;
  p99.name = "ttft_p99_ms";
  p99.limit_ms = 1000;
  lim.percentiles.push_back(p99);
  lim.ttft_ms = 500;
  lim.tpot_ms = 1e9;
  lim.min_attainment = 0.99;
  // At most 300 requests: p99 needs 300 - floor(0.99 x 299) = 5 above 1 s; the attainment fails
  // at the fourth miss (297 / 300 < 0.99).
  SloWatch w(lim, 300);
  for (int64_t k = 0; k < 3; ++k) w.on_queued(k, 0);
  w.on_time(from_seconds(0.5));  // waited exactly 0.5 s: not past the attainment's limit
  EXPECT_FALSE(w.failed());
  w.on_time(from_seconds(0.6));  // 3 missed
  EXPECT_FALSE(w.failed());
  // Its first token at 2 s, before a time past 1 s was seen: a sample above 1 s; missed, counted
  // by its wait already.
  w.on_first_token(record(0, 2.0, -1, 0), from_seconds(2.0), 0);
  EXPECT_FALSE(w.failed());
  // Requests 1 and 2 wait past 1 s: 3 of the p99's 5.
  w.on_time(from_seconds(2.1));
  EXPECT_FALSE(w.failed());
  // A first token in time settles a request for both limits.
  w.on_queued(3, from_seconds(3.0));
  w.on_first_token(record(3.0, 3.1, -1, 0), from_seconds(3.1), 3);
  w.on_time(from_seconds(10));
  EXPECT_FALSE(w.failed());
  // A fourth wait past 0.5 s fails the attainment at the first time seen after it.
  w.on_queued(4, from_seconds(10));
  w.on_time(from_seconds(10.4));
  EXPECT_FALSE(w.failed());
  w.on_time(from_seconds(10.6));
  ASSERT_TRUE(w.failed());
  EXPECT_EQ(w.failure(),
            "attainment < 0.99 (decided early at 10.600 s: 4 requests missed, of at most 300)");
}

// Waits past the p99's limit decide it like samples above it; requests queued before the latest
// warm-up cut are not watched.
TEST(SloWatch, DecidesAPercentileFromWaits) {
  SloWatchLimits lim;
  SloWatchLimits::Percentile p99;
  p99.name = "ttft_p99_ms";
  p99.limit_ms = 1000;
  lim.percentiles.push_back(p99);
  SloWatch w(lim, 200, from_seconds(1.0));  // 200 - floor(0.99 x 199) = 3 above the limit
  w.on_queued(0, from_seconds(0.5));        // in the warm-up: never counted
  w.on_queued(1, from_seconds(1.0));
  w.on_queued(2, from_seconds(1.0));
  w.on_time(from_seconds(5));
  EXPECT_FALSE(w.failed());
  w.on_first_token(record(1.5, 3.0, -1, 0), from_seconds(5), -1);  // never queued: a sample
  ASSERT_TRUE(w.failed());
  EXPECT_EQ(w.failure(),
            "ttft_p99_ms > 1000 (decided early at 5.000 s: 3 samples above the limit, of at most "
            "200 requests)");
}

TEST(SloWatch, WatchesOnlyWhatTheSummaryComputesExactly) {
  SloWatchLimits lim = ttft_p99(1000);
  lim.percentiles.push_back({"queueing_p50_ms", SloWatchLimits::Metric::kQueueing, 0.5, 1});
  // Beyond the sketch's exact samples the percentile is bucketed: not watched.
  const auto many = static_cast<int64_t>(PercentileSketch::kExactSamples) + 1;
  SloWatch bucketed(lim, many);
  for (int i = 0; i < 2000; ++i) bucketed.on_first_token(record(0, 5, -1, 0), from_seconds(5));
  EXPECT_FALSE(bucketed.failed());
  // TPOT and end-to-end samples come at completion, with their own limits.
  SloWatchLimits tail;
  tail.percentiles.push_back({"tpot_p50_ms", SloWatchLimits::Metric::kTpot, 0.5, 10});
  tail.percentiles.push_back({"e2e_p50_ms", SloWatchLimits::Metric::kE2e, 0.5, 1e6});
  tail.ttft_ms = tail.tpot_ms = 1e9;
  SloWatch t(tail, 3);  // p50 of up to 3 samples: 3 - floor(0.5 x 2) = 2 above
  t.on_complete(record(0, 0.1, 0.3, 11), from_seconds(0.3));   // TPOT 20 ms
  t.on_complete(record(0, 0.1, 0.15, 11), from_seconds(0.4));  // TPOT 5 ms
  EXPECT_FALSE(t.failed());
  t.on_complete(record(0, 0.1, 1.1, 2), from_seconds(1.1));  // TPOT 1 s
  ASSERT_TRUE(t.failed());
  EXPECT_EQ(t.failure().rfind("tpot_p50_ms > 10 (", 0), 0u) << t.failure();
  // No request: nothing to decide.
  SloWatch empty(ttft_p99(1), 0);
  empty.on_reject(record(0, -1, -1, 0), 0);
  EXPECT_FALSE(empty.failed());
}

}  // namespace
}  // namespace moesim::sim
