// The micro-batch timeline against timelines computed by hand (times in arbitrary units: the
// function only adds and compares). Each case lists the ops in the order the timeline issues
// them, with start -> end, in its comments.
#include "sim/serving/layer_timeline.h"

#include <gtest/gtest.h>

#include <vector>

namespace moesim::sim {
namespace {

struct Stage {
  double attention_prep = 0, attention = 0, router = 0, dispatch = 0, shared = 0, experts = 0,
         combine = 0;
};

// One layer with the same costs for both micro-batches and every GPU, except `experts_of_gpu`
// (when non-empty) per GPU.
LayerStageCosts layer(int32_t layer_idx, int32_t num_gpus, const Stage& s,
                      const std::vector<double>& experts_of_gpu = {}) {
  LayerStageCosts c;
  c.reset(layer_idx, num_gpus);
  for (int32_t mb = 0; mb < 2; ++mb) {
    for (int32_t g = 0; g < num_gpus; ++g) {
      c.compute(mb, StageOp::kAttentionPrep, g) = s.attention_prep;
      c.compute(mb, StageOp::kAttention, g) = s.attention;
      c.compute(mb, StageOp::kRouter, g) = s.router;
      c.compute(mb, StageOp::kSharedExperts, g) = s.shared;
      c.compute(mb, StageOp::kExperts, g) = experts_of_gpu.empty() ? s.experts : experts_of_gpu[g];
    }
    c.comm(mb, StageOp::kDispatch) = s.dispatch;
    c.comm(mb, StageOp::kCombine) = s.combine;
  }
  return c;
}

TimelineTotals zero_totals(size_t n) {
  return {std::vector<double>(n, 0.0), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
}

// The barrier path (StepModel without overlap) as a one-micro-batch timeline, two GPUs:
//   attention  g0 0 -> 3, g1 0 -> 5;   router g0 3 -> 4, g1 5 -> 6
//   dispatch   barrier at max(4, 6) = 6 -> 10
//   experts    g0 10 -> 16, g1 10 -> 12
//   combine    barrier at max(16, 12) = 16 -> 19
// compute g0 3 + 1 + 6 = 10, g1 5 + 1 + 2 = 8; comm 4 + 3 = 7 each; wait g0 = 19 - 17 = 2
// (router end 4 -> dispatch 6), g1 = 19 - 15 = 4 (experts end 12 -> combine 16).
TEST(LayerTimelineTest, SequentialScheduleIsTheBarrierPath) {
  LayerStageCosts c = layer(3, 2, Stage{0, 0, 1, 4, 0, 0, 3}, {6, 2});
  c.compute(0, StageOp::kAttention, 0) = 3;
  c.compute(0, StageOp::kAttention, 1) = 5;
  std::vector<double> clock = {0, 0};
  TimelineTotals t = zero_totals(2);
  std::vector<TimelineSpan> spans;
  run_microbatch_timeline(sequential_schedule(), std::vector<LayerStageCosts>{c}, SmSharing{},
                          clock, t, &spans);
  EXPECT_DOUBLE_EQ(clock[0], 19);
  EXPECT_DOUBLE_EQ(clock[1], 19);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 10);
  EXPECT_DOUBLE_EQ(t.compute_s[1], 8);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 7);
  EXPECT_DOUBLE_EQ(t.comm_s[1], 7);
  EXPECT_DOUBLE_EQ(t.wait_s[0], 2);
  EXPECT_DOUBLE_EQ(t.wait_s[1], 4);
  // Spans: 5 ops x 2 GPUs, the dispatch at the barrier on both GPUs, all in layer 3.
  ASSERT_EQ(spans.size(), 10u);
  for (const TimelineSpan& s : spans) {
    EXPECT_EQ(s.layer_idx, 3);
    EXPECT_EQ(s.mb, 0);
    if (s.op == StageOp::kDispatch) {
      EXPECT_DOUBLE_EQ(s.start_s, 6);
    }
    if (s.op == StageOp::kCombine) {
      EXPECT_DOUBLE_EQ(s.start_s, 16);
    }
  }
}

// DeepSeek's prefill schedule, one GPU, one layer, compute-bound. Per micro-batch: attention 4,
// router 1, dispatch 3, experts 5, shared 2, combine 3. Stages [attn router dispatch] [experts
// combine] [shared], issued A0 B0 A1 B1 A2 B2:
//   A: attention 0 -> 4, router 4 -> 5, dispatch 5 -> 8
//   B: attention 5 -> 9, router 9 -> 10, dispatch 10 -> 13 (comm free at 8)
//   A: experts 10 -> 15 (dispatch ended 8, compute free 10), combine 15 -> 18
//   B: experts 15 -> 20, combine 20 -> 23
//   A: shared 20 -> 22;  B: shared 22 -> 24
// End 24 = the compute (2 x 12); both collectives of each micro-batch hidden; no wait. Without
// overlap the same work takes 24 + 12 = 36.
TEST(LayerTimelineTest, TwoMicrobatchHidesCommunicationUnderCompute) {
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  std::vector<TimelineSpan> spans;
  run_microbatch_timeline(two_microbatch_schedule(),
                          std::vector<LayerStageCosts>{layer(0, 1, Stage{0, 4, 1, 3, 2, 5, 3})},
                          SmSharing{}, clock, t, &spans);
  EXPECT_DOUBLE_EQ(clock[0], 24);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 24);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 12);
  EXPECT_DOUBLE_EQ(t.wait_s[0], 0);
  auto start_of = [&](StageOp op, int32_t mb) {
    for (const TimelineSpan& s : spans) {
      if (s.op == op && s.mb == mb) return s.start_s;
    }
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(start_of(StageOp::kAttention, 1), 5);
  EXPECT_DOUBLE_EQ(start_of(StageOp::kDispatch, 1), 10);
  EXPECT_DOUBLE_EQ(start_of(StageOp::kExperts, 0), 10);
  EXPECT_DOUBLE_EQ(start_of(StageOp::kCombine, 0), 15);
  EXPECT_DOUBLE_EQ(start_of(StageOp::kCombine, 1), 20);
  EXPECT_DOUBLE_EQ(start_of(StageOp::kSharedExperts, 1), 22);
}

// The same costs over two layers: a layer's last stage joins the next layer's first, so
// micro-batch 1's combine of layer 0 (20 -> 23) runs under micro-batch 0's shared experts and
// next attention. After A1 B1 of layer 0 (compute free 20, comm free 23):
//   A: shared L0 20 -> 22, attention L1 22 -> 26 (layer 0 ended max(18, 22)), router 26 -> 27,
//      dispatch L1 27 -> 30
//   B: shared L0 27 -> 29, attention L1 29 -> 33 (layer 0 ended max(23, 29)), router 33 -> 34,
//      dispatch L1 34 -> 37
//   A: experts L1 34 -> 39, combine 39 -> 42;  B: experts 39 -> 44, combine 44 -> 47
//   A: shared L1 44 -> 46;  B: shared L1 46 -> 48
// End 48 = 2 x 24: the compute of both layers, every collective hidden.
TEST(LayerTimelineTest, TwoMicrobatchCarriesMicrobatchesAcrossLayers) {
  const Stage s{0, 4, 1, 3, 2, 5, 3};
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  run_microbatch_timeline(two_microbatch_schedule(),
                          std::vector<LayerStageCosts>{layer(0, 1, s), layer(1, 1, s)}, SmSharing{},
                          clock, t, nullptr);
  EXPECT_DOUBLE_EQ(clock[0], 48);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 48);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 24);
  EXPECT_DOUBLE_EQ(t.wait_s[0], 0);
}

// Communication-bound prefill, one GPU: attention 1, router 0, dispatch 10, experts 1, no
// shared experts, combine 10.
//   A: attention 0 -> 1, dispatch 1 -> 11;  B: attention 1 -> 2, dispatch 11 -> 21
//   A: experts 11 -> 12, combine 21 -> 31;  B: experts 21 -> 22, combine 31 -> 41
// End 41: the four collectives back to back after A's attention. Compute 4, comm 40, overlapping
// for 3 (1 -> 2, 11 -> 12, 21 -> 22): busy 41, no wait.
TEST(LayerTimelineTest, TwoMicrobatchCommunicationBound) {
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  run_microbatch_timeline(two_microbatch_schedule(),
                          std::vector<LayerStageCosts>{layer(0, 1, Stage{0, 1, 0, 10, 0, 1, 10})},
                          SmSharing{}, clock, t, nullptr);
  EXPECT_DOUBLE_EQ(clock[0], 41);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 4);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 40);
  EXPECT_DOUBLE_EQ(t.wait_s[0], 0);
}

// Two GPUs, prefill schedule, GPU 1's experts 7 instead of 5 (costs otherwise as above), clocks
// starting at 0 and 2 (GPU 1 enters the layer late):
//   A: attention g0 0 -> 4, g1 2 -> 6; router g0 4 -> 5, g1 6 -> 7; dispatch barrier 7 -> 10
//   B: attention g0 5 -> 9, g1 7 -> 11; router g0 9 -> 10, g1 11 -> 12; dispatch 12 -> 15
//   A: experts g0 10 -> 15, g1 12 -> 19; combine barrier 19 -> 22
//   B: experts g0 15 -> 20, g1 19 -> 26; combine barrier 26 -> 29
//   A: shared g0 20 -> 22, g1 26 -> 28;  B: shared g0 22 -> 24, g1 28 -> 30
// GPU 0 ends 29 (B's combine), GPU 1 30 (B's shared). Compute g0 24, g1 28; comm 12 each.
// GPU 0 busy: compute [0, 24], then idle until B's combine barrier at 26 (GPU 1's experts), comm
// 26 -> 29: busy 27 of 29, wait 2. GPU 1 busy [2, 30]: wait 0.
TEST(LayerTimelineTest, TwoMicrobatchBarriersWaitForTheSlowestGpu) {
  std::vector<double> clock = {0, 2};
  TimelineTotals t = zero_totals(2);
  run_microbatch_timeline(
      two_microbatch_schedule(),
      std::vector<LayerStageCosts>{layer(0, 2, Stage{0, 4, 1, 3, 2, 0, 3}, {5, 7})}, SmSharing{},
      clock, t, nullptr);
  EXPECT_DOUBLE_EQ(clock[0], 29);
  EXPECT_DOUBLE_EQ(clock[1], 30);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 24);
  EXPECT_DOUBLE_EQ(t.compute_s[1], 28);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 12);
  EXPECT_DOUBLE_EQ(t.wait_s[0], 2);
  EXPECT_DOUBLE_EQ(t.wait_s[1], 0);
}

// A GPU idle while both resources wait: two GPUs, sequential-like costs under the prefill
// schedule where GPU 0 has no expert work and GPU 1 a long one (experts 0 and 10; attention 1,
// router 0, dispatch 1, combine 1, no shared):
//   A: attention 0 -> 1 (both), dispatch 1 -> 2;  B: attention 1 -> 2, dispatch 2 -> 3
//   A: experts g0 2 -> 2, g1 2 -> 12; combine barrier 12 -> 13
//   B: experts g0 3 -> 3, g1 12 -> 22; combine barrier 22 -> 23
// GPU 0: compute 2, comm 4 (busy [0, 3] and the combines 12 -> 13, 22 -> 23: 5 units), end 23:
// wait 23 - 5 = 18. GPU 1: compute 22, busy [0, 23] with the last combine: wait 0.
TEST(LayerTimelineTest, IdleGpuWaitsAtTheCombineBarriers) {
  std::vector<double> clock = {0, 0};
  TimelineTotals t = zero_totals(2);
  run_microbatch_timeline(
      two_microbatch_schedule(),
      std::vector<LayerStageCosts>{layer(0, 2, Stage{0, 1, 0, 1, 0, 0, 1}, {0, 10})}, SmSharing{},
      clock, t, nullptr);
  EXPECT_DOUBLE_EQ(clock[0], 23);
  EXPECT_DOUBLE_EQ(clock[1], 23);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 2);
  EXPECT_DOUBLE_EQ(t.compute_s[1], 22);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 4);
  EXPECT_DOUBLE_EQ(t.wait_s[0], 18);
  EXPECT_DOUBLE_EQ(t.wait_s[1], 0);
}

// DeepSeek's decode pipeline, one GPU, one layer. Per micro-batch: attention_prep 1, attention 2,
// router 1, dispatch 4, shared 1, experts 3, combine 4. Stages [prep] [attn router] [dispatch
// shared] [experts combine] [], micro-batch 1 two stages behind: A0 A1 A2 B0 A3 B1 A4 B2 B3 B4.
//   A: prep 0 -> 1; attention 1 -> 3, router 3 -> 4; dispatch 4 -> 8, shared 4 -> 5
//   B: prep 5 -> 6
//   A: experts 8 -> 11 (waits for its dispatch), combine 11 -> 15
//   B: attention 11 -> 13, router 13 -> 14
//   B: dispatch 15 -> 19 (comm busy with A's combine until 15), shared 14 -> 15
//   B: experts 19 -> 22, combine 22 -> 26
// End 26 (without overlap 2 x 16 = 32). Compute 16, comm 16, overlapping 6 (4 -> 6 and
// 11 -> 15): busy 26, no wait.
TEST(LayerTimelineTest, DecodePipelineHandComputed) {
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  std::vector<TimelineSpan> spans;
  run_microbatch_timeline(decode_pipeline_schedule(),
                          std::vector<LayerStageCosts>{layer(0, 1, Stage{1, 2, 1, 4, 1, 3, 4})},
                          SmSharing{}, clock, t, &spans);
  EXPECT_DOUBLE_EQ(clock[0], 26);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 16);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 16);
  EXPECT_DOUBLE_EQ(t.wait_s[0], 0);
  // The issue order of the compute ops and the collectives' starts.
  std::vector<std::pair<StageOp, int32_t>> compute_order;
  for (const TimelineSpan& s : spans) {
    if (!is_comm_op(s.op)) compute_order.emplace_back(s.op, s.mb);
    if (s.op == StageOp::kDispatch) {
      EXPECT_DOUBLE_EQ(s.start_s, s.mb == 0 ? 4 : 15);
    }
    if (s.op == StageOp::kCombine) {
      EXPECT_DOUBLE_EQ(s.start_s, s.mb == 0 ? 11 : 22);
    }
  }
  const std::vector<std::pair<StageOp, int32_t>> expected = {
      {StageOp::kAttentionPrep, 0}, {StageOp::kAttention, 0},     {StageOp::kRouter, 0},
      {StageOp::kSharedExperts, 0}, {StageOp::kAttentionPrep, 1}, {StageOp::kExperts, 0},
      {StageOp::kAttention, 1},     {StageOp::kRouter, 1},        {StageOp::kSharedExperts, 1},
      {StageOp::kExperts, 1}};
  EXPECT_EQ(compute_order, expected);
}

// Over two layers the decode pipeline interleaves: micro-batch 0's next prep runs right after
// B's router (its combine of layer 0 ended at 15), before B's shared experts and experts. From
// the state above after B1 (compute free 14, comm: A's combine ends 15):
//   A4 = [prep L1]: 15 -> 16 (layer 0 of A ended max(15, 5) = 15)
//   B2: dispatch L0 15 -> 19 (issued after A's combine), shared 16 -> 17
//   A5: attention L1 17 -> 19, router 19 -> 20
//   B3: experts L0 20 -> 23 (dispatch ended 19), combine 23 -> 27
//   A6: dispatch L1 27 -> 31 (comm free 27), shared L1 23 -> 24
//   B4 = [prep L1]: 27 -> 28 (B's layer 0 ended max(27, 17))
//   A7: experts L1 31 -> 34, combine 34 -> 38
//   B5: attention L1 34 -> 36, router 36 -> 37
//   B6: dispatch L1 38 -> 42, shared 37 -> 38
//   B7: experts L1 42 -> 45, combine 45 -> 49
// End 49 for two layers (one layer alone: 26; without overlap 64).
TEST(LayerTimelineTest, DecodePipelineTwoLayers) {
  const Stage s{1, 2, 1, 4, 1, 3, 4};
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  run_microbatch_timeline(decode_pipeline_schedule(),
                          std::vector<LayerStageCosts>{layer(0, 1, s), layer(1, 1, s)}, SmSharing{},
                          clock, t, nullptr);
  EXPECT_DOUBLE_EQ(clock[0], 49);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 32);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 32);
}

// SM sharing (docs/serving.md, "SM sharing"): a collective holding 24 of 132 SMs leaves compute
// beside it 108 / 132 = 9 / 11 of its rate. Work is conserved: an op under a collective for a
// time T does 9T/11 of its work there and ends 2T/11 later than at full rate.
const SmSharing kDeepEpNormal{132, 24};

// Two ops: micro-batch 0's dispatch of 4 ms (everything before it costs 0) and micro-batch 1's
// attention of 10 ms, both from 0. Under the dispatch the attention does 4 x 9/11 = 36/11 ms of
// work; the remaining 74/11 at full rate end it at 4 + 74/11 = 118/11 ms = 10 + 8/11 ms.
TEST(LayerTimelineTest, ComputeBesideACollectiveRunsOnTheSmsLeft) {
  LayerStageCosts c = layer(0, 1, Stage{});
  c.comm(0, StageOp::kDispatch) = 4e-3;
  c.compute(1, StageOp::kAttention, 0) = 10e-3;
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  std::vector<TimelineSpan> spans;
  run_microbatch_timeline(two_microbatch_schedule(), std::vector<LayerStageCosts>{c}, kDeepEpNormal,
                          clock, t, &spans);
  EXPECT_NEAR(clock[0], 118e-3 / 11, 1e-15);
  EXPECT_NEAR(t.compute_s[0], 118e-3 / 11, 1e-15);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 4e-3);
  for (const TimelineSpan& s : spans) {
    const bool slowed = s.op == StageOp::kAttention && s.mb == 1;
    EXPECT_NEAR(s.sm_lost_s, slowed ? 8e-3 / 11 : 0, 1e-15) << stage_span_name(s.op, s.mb);
    if (slowed) EXPECT_NEAR(s.duration_s, 118e-3 / 11, 1e-15);
  }
}

// The overlap begins and ends mid-op. Two GPUs: micro-batch 0's attention takes 1 on GPU 0 and 3
// on GPU 1, so its dispatch (a barrier, 4) runs 3 -> 7. GPU 0's micro-batch-1 attention (10)
// starts at 1: full rate 1 -> 3 (2 done), 9/11 rate 3 -> 7 (36/11 done), full rate for the last
// 10 - 2 - 36/11 = 52/11: it ends at 7 + 52/11 = 129/11 = 1 + 10 + 4 x 2/11. On GPU 1 it starts
// with the dispatch at 3 and ends at 3 + 10 + 8/11 = 151/11. The zero-cost collectives after it
// are barriers: both GPUs end at 151/11, GPU 0 waiting 151/11 - 129/11 = 2.
TEST(LayerTimelineTest, SmSharingOverlapStartingMidOp) {
  LayerStageCosts c = layer(0, 2, Stage{});
  c.compute(0, StageOp::kAttention, 0) = 1;
  c.compute(0, StageOp::kAttention, 1) = 3;
  c.comm(0, StageOp::kDispatch) = 4;
  c.compute(1, StageOp::kAttention, 0) = 10;
  c.compute(1, StageOp::kAttention, 1) = 10;
  std::vector<double> clock = {0, 0};
  TimelineTotals t = zero_totals(2);
  std::vector<TimelineSpan> spans;
  run_microbatch_timeline(two_microbatch_schedule(), std::vector<LayerStageCosts>{c}, kDeepEpNormal,
                          clock, t, &spans);
  for (const TimelineSpan& s : spans) {
    if (s.op != StageOp::kAttention || s.mb != 1) continue;
    EXPECT_DOUBLE_EQ(s.start_s, s.gpu == 0 ? 1 : 3);
    EXPECT_NEAR(s.start_s + s.duration_s, s.gpu == 0 ? 129.0 / 11 : 151.0 / 11, 1e-12);
    EXPECT_NEAR(s.sm_lost_s, 8.0 / 11, 1e-12);
  }
  EXPECT_NEAR(clock[0], 151.0 / 11, 1e-12);
  EXPECT_NEAR(clock[1], 151.0 / 11, 1e-12);
  EXPECT_NEAR(t.compute_s[0], 129.0 / 11, 1e-12);  // 1 + (129/11 - 1)
  EXPECT_NEAR(t.compute_s[1], 3 + 10 + 8.0 / 11, 1e-12);
  EXPECT_NEAR(t.wait_s[0], 2, 1e-12);
  EXPECT_NEAR(t.wait_s[1], 0, 1e-12);
}

// The prefill case above (attention 4, router 1, dispatch 3, experts 5, shared 2, combine 3) with
// 24 of 132 SMs held by the collectives; issue order and dependencies as before, r = 9/11:
//   A: attention 0 -> 4, router 4 -> 5, dispatch 5 -> 8
//   B: attention 5 -> 105/11 (3 under A's dispatch: 27/11 done, 17/11 after), router -> 116/11,
//      dispatch 116/11 -> 149/11
//   A: experts 116/11 -> 177/11 (3 under B's dispatch), combine 177/11 -> 210/11
//   B: experts 177/11 -> 238/11 (3 under A's combine), combine 238/11 -> 271/11
//   A: shared 238/11 -> 238/11 + 22/9 = 2384/99 (all under B's combine)
//   B: shared 2384/99 -> 2592/99 = 288/11 (5/9 under B's combine: 5/11 done, 17/11 after)
// End 288/11 (24 without sharing); compute 24 + 12 x 2/11 (12 units under a collective).
TEST(LayerTimelineTest, SmSharingSlowsTheTwoMicrobatchPrefill) {
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  std::vector<TimelineSpan> spans;
  run_microbatch_timeline(two_microbatch_schedule(),
                          std::vector<LayerStageCosts>{layer(0, 1, Stage{0, 4, 1, 3, 2, 5, 3})},
                          kDeepEpNormal, clock, t, &spans);
  EXPECT_NEAR(clock[0], 288.0 / 11, 1e-12);
  EXPECT_NEAR(t.compute_s[0], 24 + 24.0 / 11, 1e-12);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 12);
  double lost = 0;
  for (const TimelineSpan& s : spans) {
    lost += s.sm_lost_s;
    if (s.op == StageOp::kCombine) {
      EXPECT_NEAR(s.start_s, s.mb == 0 ? 177.0 / 11 : 238.0 / 11, 1e-12);
    }
    if (s.op == StageOp::kSharedExperts && s.mb == 0) {
      EXPECT_NEAR(s.start_s + s.duration_s, 2384.0 / 99, 1e-12);
    }
  }
  EXPECT_NEAR(lost, 24.0 / 11, 1e-12);
}

// The decode pipeline over two layers (costs of DecodePipelineTwoLayers) with 24 of 132 SMs.
// Micro-batch 0's prep of layer 1 is issued before micro-batch 1's dispatch of layer 0 but runs
// under it: from the one-layer case (B's router ends 44/3, A's combine ends 15):
//   A: prep L1 15 -> 15 + 11/9 = 146/9 (under B's dispatch 15 -> 19, issued after it)
//   B: dispatch L0 15 -> 19, shared 146/9 -> 157/9
//   A: attention L1 157/9 -> 217/11 (14/9 under B's dispatch), router -> 228/11
//   B: experts L0 228/11 -> 261/11, combine 261/11 -> 305/11
//   A: dispatch L1 305/11 -> 349/11, shared L1 261/11 -> 2470/99
//   B: prep L1 305/11 -> 2866/99;  A: experts L1 349/11 -> 382/11, combine -> 426/11
//   B: attention L1 382/11 -> 3680/99, router -> 3801/99, dispatch 426/11 -> 4230/99,
//      shared -> 3922/99;  experts 4230/99 -> 4527/99, combine -> 4923/99 = 547/11
// End 547/11 (49 without sharing). The case was also checked by an event-driven processor-sharing
// simulation in exact fractions.
TEST(LayerTimelineTest, SmSharingUnderACollectiveIssuedLater) {
  const Stage s{1, 2, 1, 4, 1, 3, 4};
  std::vector<double> clock = {0};
  TimelineTotals t = zero_totals(1);
  std::vector<TimelineSpan> spans;
  run_microbatch_timeline(decode_pipeline_schedule(),
                          std::vector<LayerStageCosts>{layer(0, 1, s), layer(1, 1, s)},
                          kDeepEpNormal, clock, t, &spans);
  EXPECT_NEAR(clock[0], 547.0 / 11, 1e-12);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 32);
  for (const TimelineSpan& sp : spans) {
    if (sp.op == StageOp::kAttentionPrep && sp.mb == 0 && sp.layer_idx == 1) {
      EXPECT_DOUBLE_EQ(sp.start_s, 15);
      EXPECT_NEAR(sp.duration_s, 11.0 / 9, 1e-12);
      EXPECT_NEAR(sp.sm_lost_s, 2.0 / 9, 1e-12);
    }
  }
}

// Low-latency kernels hold no SMs: comm_sms 0 gives the timeline without sharing bit for bit,
// whatever the GPU.
TEST(LayerTimelineTest, NoSmsHeldLeavesTheTimelineUnchanged) {
  const Stage s{1, 2, 1, 4, 1, 3, 4};
  for (const SmSharing& sm : {SmSharing{}, SmSharing{132, 0}}) {
    std::vector<double> clock = {0};
    TimelineTotals t = zero_totals(1);
    std::vector<TimelineSpan> spans;
    run_microbatch_timeline(decode_pipeline_schedule(),
                            std::vector<LayerStageCosts>{layer(0, 1, s), layer(1, 1, s)}, sm, clock,
                            t, &spans);
    EXPECT_EQ(clock[0], 49);
    EXPECT_EQ(t.compute_s[0], 32);
    for (const TimelineSpan& sp : spans) EXPECT_EQ(sp.sm_lost_s, 0);
  }
  EXPECT_EQ(SmSharing{}.compute_rate(), 1.0);
  EXPECT_EQ(SmSharing({132, 0}).compute_rate(), 1.0);
  EXPECT_DOUBLE_EQ(kDeepEpNormal.compute_rate(), 108.0 / 132);
}

TEST(LayerTimelineTest, SpanNames) {
  EXPECT_STREQ(stage_span_name(StageOp::kDispatch, 1), "dispatch/mb1");
  EXPECT_STREQ(stage_span_name(StageOp::kAttentionPrep, 0), "attention_prep/mb0");
  EXPECT_STREQ(stage_op_name(StageOp::kSharedExperts), "shared_experts");
  EXPECT_TRUE(decode_pipeline_schedule().has(StageOp::kAttentionPrep));
  EXPECT_FALSE(two_microbatch_schedule().has(StageOp::kAttentionPrep));
}

}  // namespace
}  // namespace moesim::sim
