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
  run_microbatch_timeline(sequential_schedule(), std::vector<LayerStageCosts>{c}, clock, t, &spans);
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
                          clock, t, &spans);
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
                          std::vector<LayerStageCosts>{layer(0, 1, s), layer(1, 1, s)}, clock, t,
                          nullptr);
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
                          clock, t, nullptr);
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
      std::vector<LayerStageCosts>{layer(0, 2, Stage{0, 4, 1, 3, 2, 0, 3}, {5, 7})}, clock, t,
      nullptr);
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
      std::vector<LayerStageCosts>{layer(0, 2, Stage{0, 1, 0, 1, 0, 0, 1}, {0, 10})}, clock, t,
      nullptr);
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
                          clock, t, &spans);
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
                          std::vector<LayerStageCosts>{layer(0, 1, s), layer(1, 1, s)}, clock, t,
                          nullptr);
  EXPECT_DOUBLE_EQ(clock[0], 49);
  EXPECT_DOUBLE_EQ(t.compute_s[0], 32);
  EXPECT_DOUBLE_EQ(t.comm_s[0], 32);
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
