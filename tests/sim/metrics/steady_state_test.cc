#include "sim/metrics/steady_state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/metrics/windowed_stats.h"

namespace moesim::sim {
namespace {

TEST(Mser5, CutsTheTransientOfARampThenFlatSeries) {
  // 20 batches: the first 4 ramp up, the rest are flat.
  std::vector<double> v;
  for (int b = 0; b < 20; ++b) {
    for (int i = 0; i < 5; ++i) v.push_back(b < 4 ? 2.0 * b : 10.0 + (i % 2 == 0 ? 0.1 : -0.1));
  }
  const MserCut cut = mser5(v);
  EXPECT_TRUE(cut.found);
  EXPECT_EQ(cut.batches_dropped, 4);
}

TEST(Mser5, FindsNoSteadyStateInASeriesThatKeepsGrowing) {
  std::vector<double> v;
  for (int i = 0; i < 200; ++i) v.push_back(i);
  const MserCut cut = mser5(v);
  EXPECT_FALSE(cut.found);
  EXPECT_EQ(cut.batches_dropped, 20);             // the last candidate: half of 40 batches
  EXPECT_FALSE(mser5({1, 2, 3, 4, 5, 6}).found);  // one batch
}

TEST(BatchMeans, HalfWidthOfTenBatchesByHand) {
  // 20 values, batches of 2 with means 9, 11, 9, 11, ...: sd of the means sqrt(10 / 9) x 1,
  // half-width t(0.975, 9) x sd / sqrt(10) = 2.262157 x 1.054093 / 3.162278 = 0.754052.
  std::vector<double> v;
  for (int b = 0; b < 10; ++b) {
    v.push_back(b % 2 == 0 ? 9 : 11);
    v.push_back(b % 2 == 0 ? 9 : 11);
  }
  const std::optional<double> hw = batch_means_rel_half_width(v);
  ASSERT_TRUE(hw.has_value());
  EXPECT_NEAR(*hw, 0.754052 / 10, 1e-6);
  EXPECT_FALSE(batch_means_rel_half_width({1, 2, 3}).has_value());
  EXPECT_FALSE(batch_means_rel_half_width(std::vector<double>(10, 0.0)).has_value());
}

TEST(SystemSeries, TimeAveragesTheRequestsInTheSystem) {
  const SimTime run = 1024 * 1000;  // bins of 1,000 ns
  SystemSeries s(run);
  EXPECT_EQ(s.bin_ns(), 1000);
  EXPECT_EQ(s.segment_ns(), 32000);
  // MSER-5 drops at most half of the full bins' batches, rounded up to a segment: 204 batches of
  // 1,024 bins -> 102 x 5 = 510 bins -> 512; an extension to 2,048 bins -> 1,020 -> 1,024; 1,000
  // bins -> 500 -> 512; 40 bins -> 20 -> 32.
  EXPECT_EQ(s.max_auto_warmup_ns(run), 512000);
  EXPECT_EQ(s.max_auto_warmup_ns(2 * run), 1024000);
  EXPECT_EQ(s.max_auto_warmup_ns(1000 * 1000), 512000);
  EXPECT_EQ(s.max_auto_warmup_ns(40 * 1000), 32000);
  // One request in the system for the whole run, a second from a quarter on: a step, then flat.
  s.on_enter(0);
  s.on_enter(256000);
  for (SimTime t = 0; t < run; t += 1000) s.on_tokens(t, 1);
  for (SimTime seg = 0; seg < 32; ++seg) {  // one request per segment, TTFT 50 ms, TPOT 10 ms
    s.on_first_token(seg * 32000, 50.0);
    s.on_complete(seg * 32000, 10.0);
  }
  SteadyStateSpec spec;
  SteadyStateResult r = s.analyse(run, spec, std::nullopt);
  EXPECT_TRUE(r.steady);
  // MSER-5 drops 52 batches (bins 0 .. 259, batch 51 straddles the step), rounded up to 9
  // segments of 32 bins.
  EXPECT_EQ(r.warmup_ns, 288000);
  EXPECT_DOUBLE_EQ(r.mean_in_system, 2.0);
  EXPECT_FALSE(r.converged);  // judged from the requests' means
  const std::vector<double> ttft = s.ttft_means(r.warmup_ns), tpot = s.tpot_means(r.warmup_ns);
  EXPECT_EQ(ttft.size(), 23u);  // segments 9 .. 31
  judge_convergence(r, ttft, tpot, spec);
  EXPECT_TRUE(r.converged) << r.reason;  // equal means: zero half-widths
  // Fewer than 10 segments with a completed request: too few.
  judge_convergence(r, ttft, std::vector<double>(9, 10.0), spec);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.reason.rfind("too few measured requests completed", 0), 0u) << r.reason;
  // Means 9, 11, 9, 11, ...: TTFT half-width 7.5% of the mean, above 5%.
  std::vector<double> noisy;
  for (int i = 0; i < 10; ++i) noisy.push_back(i % 2 == 0 ? 9 : 11);
  judge_convergence(r, noisy, tpot, spec);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.reason,
            "95% half-widths of the batch means TTFT 7.5%, TPOT 0.0%, above 5.0%: run longer");
  // A fixed warm-up is rounded up to a segment.
  spec.warmup_s = 40e-6;
  EXPECT_EQ(s.analyse(run, spec, std::nullopt).warmup_ns, 64000);
}

TEST(SystemSeries, AFiniteWorkloadThatDrainedIsTerminating) {
  const SimTime run = 1024 * 1000;
  SystemSeries s(run);
  s.on_enter(0);
  s.on_leave(100000);
  SteadyStateResult r = s.analyse(run, SteadyStateSpec{}, /*arrivals_end_ns=*/0);
  EXPECT_TRUE(r.terminating);
  judge_convergence(r, {}, {}, SteadyStateSpec{});
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.warmup_ns, 0);
  // The same series with arrivals still to come is judged as a steady state.
  SystemSeries t(run);
  EXPECT_FALSE(t.analyse(run, SteadyStateSpec{}, std::nullopt).terminating);
  // Arrivals that went on into the last segment: not terminating either.
  EXPECT_FALSE(t.analyse(run, SteadyStateSpec{}, run - 1000).terminating);
}

TEST(SystemSeries, AGrowingQueueIsNotSteady) {
  const SimTime run = 1024 * 1000;
  SystemSeries s(run);
  for (SimTime t = 0; t < run; t += 5000) s.on_enter(t);
  SteadyStateResult r = s.analyse(run, SteadyStateSpec{}, std::nullopt);
  EXPECT_FALSE(r.steady);
  judge_convergence(r, std::vector<double>(20, 1.0), std::vector<double>(20, 1.0),
                    SteadyStateSpec{});
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.reason.rfind("no steady state: the requests in the system still trend", 0), 0u)
      << r.reason;
}

TEST(WindowedRequestStats, CutsWholeSegmentsFromTheFront) {
  WindowedRequestStats w(100, 10, /*segment_ns=*/1000);
  for (SimTime t : {0, 500, 1000, 2500}) {
    RequestRecord r;
    r.arrival_ns = t;
    r.first_scheduled_ns = t;
    r.first_token_ns = t + 10;
    r.done_ns = t + 20;
    r.outcome = RequestOutcome::kCompleted;
    r.generated_tokens = 1;
    w.add(r, 3000);
  }
  EXPECT_EQ(w.num_arrived(), 4);
  EXPECT_EQ(w.from(0).num_arrived(), 4);
  EXPECT_EQ(w.from(1000).num_arrived(), 2);
  EXPECT_EQ(w.from(1500).num_arrived(), 2);  // rounded down to the segment's start
  EXPECT_EQ(w.from(3000).num_arrived(), 0);
}

}  // namespace
}  // namespace moesim::sim
