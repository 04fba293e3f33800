#include "sim/workload/trace_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/workload/mooncake_trace.h"

namespace moesim::sim {
namespace {

const std::string kTraces = MOESIM_SOURCE_DIR "/data/traces/";

TraceRecord row(int64_t t_ms, int64_t input, int64_t output, std::vector<uint64_t> ids) {
  TraceRecord r;
  r.timestamp_ns = t_ms * kNsPerMs;
  r.input_tokens = input;
  r.output_tokens = output;
  r.hash_ids = std::move(ids);
  return r;
}

// Rows 0 and 1 share private id 1 (one conversation); id 0 is in all three rows (shared).
std::vector<TraceRecord> three_rows() {
  return {row(0, 1024, 10, {0, 1}), row(1000, 1536, 20, {0, 1, 2}), row(3000, 512, 30, {0, 3})};
}

TEST(TraceModel, SessionsAreRowsLinkedByPrivateIds) {
  const std::vector<TraceRecord> rows = three_rows();
  const TraceWindow w = select_trace_window(rows, 0.0, 6.0, std::nullopt);
  const TraceModel m = fit_trace_model(rows, w);
  ASSERT_EQ(m.sessions.size(), 2u);
  ASSERT_EQ(m.sessions[0].turns.size(), 2u);
  EXPECT_EQ(m.sessions[0].num_private_ids, 2u);
  EXPECT_EQ(m.sessions[0].turns[1].offset_ns, 1000 * kNsPerMs);
  EXPECT_EQ(m.sessions[0].turns[1].hash_ids,
            (std::vector<uint64_t>{0, kPrivateHashBit | 0, kPrivateHashBit | 1}));
  EXPECT_EQ(m.sessions[1].turns[0].hash_ids, (std::vector<uint64_t>{0, kPrivateHashBit | 0}));
  EXPECT_EQ(m.first_fresh_id, 4u);
  EXPECT_EQ(m.num_shared_ids, 1);
  EXPECT_EQ(m.max_session_span_ns, 1000 * kNsPerMs);
  // Too few timestamps for a lattice: two start batches (0 and 3 s) over a 6 s lap, so gaps of
  // 3 s and, across the seam, 3 s.
  EXPECT_EQ(m.arrival.kind, TraceArrivalFit::Kind::kRenewal);
  EXPECT_EQ(m.arrival.batch_sizes, (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(m.arrival.gaps_ns, (std::vector<SimTime>{3 * kNsPerS, 3 * kNsPerS}));
  EXPECT_DOUBLE_EQ(m.arrival.batches_per_s(), 2 / 6.0);
  EXPECT_EQ(m.arrival.gap_cv(), 0.0);
  EXPECT_DOUBLE_EQ(m.rate_per_s(), 3 / 6.0);  // = the window's 3 rows over 6 s
}

TEST(TraceModel, CopiesOfASessionGetFreshPrivateIdsAndKeepSharedOnes) {
  const std::vector<TraceRecord> rows = three_rows();
  const TraceModel m = fit_trace_model(rows, select_trace_window(rows, 0.0, 6.0, std::nullopt));
  TraceModelSampler sampler(m, 1.0);
  RngStream rng(3, "workload");
  std::vector<TraceDraw> draws;
  for (int i = 0; i < 200; ++i) draws.push_back(*sampler.next(rng));
  int64_t second_turns = 0;
  for (size_t i = 0; i < draws.size(); ++i) {
    const TraceDraw& d = draws[i];
    if (i > 0) {
      EXPECT_GE(d.arrival_ns, draws[i - 1].arrival_ns);
    }
    EXPECT_EQ(d.hash_ids[0], 0u);
    for (size_t b = 1; b < d.hash_ids.size(); ++b) EXPECT_GE(d.hash_ids[b], 4u);
    if (d.input_tokens == 1536) {
      // A second turn follows its first one second later, with the first turn's private id.
      ++second_turns;
      bool found = false;
      for (size_t j = 0; j < i; ++j) {
        found = found || (draws[j].input_tokens == 1024 && draws[j].hash_ids[1] == d.hash_ids[1] &&
                          d.arrival_ns - draws[j].arrival_ns == 1000 * kNsPerMs);
      }
      EXPECT_TRUE(found || d.arrival_ns < 1000 * kNsPerMs) << "draw " << i;
      EXPECT_EQ(d.hash_ids[2], d.hash_ids[1] + 1);
    }
  }
  EXPECT_GT(second_turns, 0);
}

TEST(TraceModel, DeterministicFromTheStream) {
  const std::vector<TraceRecord> rows = three_rows();
  const TraceModel m = fit_trace_model(rows, select_trace_window(rows, 0.0, 6.0, std::nullopt));
  auto draw = [&m](uint64_t seed, double multiplier) {
    TraceModelSampler sampler(m, multiplier);
    RngStream rng(seed, "workload");
    std::vector<SimTime> t;
    for (int i = 0; i < 50; ++i) t.push_back(sampler.next(rng)->arrival_ns);
    return t;
  };
  EXPECT_EQ(draw(1, 1.0), draw(1, 1.0));
  EXPECT_NE(draw(1, 1.0), draw(2, 1.0));
  EXPECT_LT(draw(1, 4.0).back(), draw(1, 1.0).back());
}

// The Mooncake conversation trace sits on a 3 s lattice; the model keeps its rate and lengths.
TEST(TraceModel, FitsTheMooncakeConversationWindow) {
  const std::vector<TraceRecord> rows = read_mooncake_trace(kTraces + "conversation_trace.jsonl");
  const TraceWindow w = select_trace_window(rows, 0.0, 600.0, std::nullopt);
  const TraceModel m = fit_trace_model(rows, w);
  EXPECT_EQ(m.arrival.kind, TraceArrivalFit::Kind::kLattice);
  EXPECT_NEAR(to_seconds(m.arrival.tick_ns), 3.0, 0.002);
  EXPECT_EQ(m.num_shared_ids, 1);  // id 0, in every row
  EXPECT_NEAR(m.rate_per_s() / w.rate_per_s(), 1.0, 0.01);
  double trace_prompt = 0;
  for (size_t i = w.begin_idx; i < w.end_idx; ++i) trace_prompt += rows[i].input_tokens;
  trace_prompt /= static_cast<double>(w.num_rows());
  TraceModelSampler sampler(m, 1.0);
  RngStream rng(1, "workload");
  double prompt = 0;
  int64_t n = 0;
  SimTime last_ns = 0;
  while (n < 20000) {
    const TraceDraw d = *sampler.next(rng);
    prompt += static_cast<double>(d.input_tokens);
    last_ns = d.arrival_ns;
    ++n;
  }
  // Tolerances: about three standard errors of 20,000 draws.
  EXPECT_NEAR(prompt / static_cast<double>(n) / trace_prompt, 1.0, 0.03);
  EXPECT_NEAR(static_cast<double>(n) / to_seconds(last_ns) / w.rate_per_s(), 1.0, 0.03);
}

}  // namespace
}  // namespace moesim::sim
