#include "sim/study/layer_study.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "sim/serving/replica_builder.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim::study {
namespace {

const std::vector<int64_t> kBatches = {4, 8, 16, 32, 64, 128};

Scenario teaching_crossover() {
  return load_scenario(std::string(MOESIM_SOURCE_DIR) + "/scenarios/teaching-crossover.toml");
}

// The first batch size where the all-to-all outgrows the slowest GPU's experts; -1 for none.
int64_t crossover(const std::vector<LayerStudyRow>& rows, bool skewed) {
  for (const auto& r : rows) {
    if (r.skewed == skewed && r.comm_us > r.expert_max_us) return r.seqs_per_gpu;
  }
  return -1;
}

// The all-to-all grows with the batch faster than expert compute (weight reads dominate small
// decode batches), so a crossover emerges; skew moves it to smaller batches.
TEST(LayerStudy, CrossoverEmergesAndSkewMovesItEarlier) {
  auto rows = run_layer_study(teaching_crossover(), kBatches, 4096, 1);
  ASSERT_EQ(rows.size(), 12u);
  int64_t skewed = crossover(rows, true), uniform = crossover(rows, false);
  ASSERT_GT(skewed, 4);  // small batches: expert weight reads dominate
  ASSERT_GT(uniform, 4);
  EXPECT_LT(skewed, uniform);
  for (size_t i = 1; i < 6; ++i) {
    EXPECT_GT(rows[i].comm_us, rows[i - 1].comm_us);  // comm grows with the batch
  }
  // The straggler: skew makes cold GPUs wait at the barriers.
  EXPECT_GT(rows[5].wait_mean_us, 10 * rows[11].wait_mean_us);
}

// Without overlap every GPU has the same attention work, so the layer's time beyond its slowest
// GPU's compute is exactly the dispatch + combine (to span rounding, 1 ns per span).
TEST(LayerStudy, WithoutOverlapAllCommunicationIsExposed) {
  auto rows = run_layer_study(teaching_crossover(), kBatches, 4096, 1);
  for (const auto& r : rows) {
    SCOPED_TRACE(r.seqs_per_gpu);
    EXPECT_GT(r.comm_us, 0);
    EXPECT_NEAR(r.exposed_comm_us, r.comm_us, 0.01);
    EXPECT_NEAR(r.layer_us, r.compute_max_us + r.comm_us, 0.01);
    EXPECT_GE(r.compute_max_us, r.expert_max_us);
  }
}

// With [deployment] overlap = "simple" the step model emits one overlapped all-to-all span; the
// study used to count only "dispatch" and "combine" and reported 0 us (issue 13). The collectives
// are the same as without overlap; the exposed part is what two half micro-batches leave
// uncovered, per layer max(C, D) + min(C, D) / 2 - C = max(D / 2, D - C / 2) for expert compute
// C and all-to-all D. That is convex in (C, D), so the mean over layers is at least the formula
// of the means (equal when every layer is on the same side of C = D).
TEST(LayerStudy, OverlapReportsTheAllToAllAndItsExposedPart) {
  Scenario barrier = teaching_crossover();
  Scenario overlap = teaching_crossover();
  overlap.deployment.overlap = OverlapMode::kSimple;
  auto base = run_layer_study(barrier, kBatches, 4096, 1);
  auto rows = run_layer_study(overlap, kBatches, 4096, 1);
  ASSERT_EQ(rows.size(), base.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const LayerStudyRow& r = rows[i];
    SCOPED_TRACE(r.seqs_per_gpu);
    EXPECT_GT(r.comm_us, 0);
    EXPECT_NEAR(r.comm_us, base[i].comm_us, 0.01);
    EXPECT_NEAR(r.expert_max_us, base[i].expert_max_us, 0.01);
    const double c = r.expert_max_us, d = r.comm_us;
    EXPECT_GE(r.exposed_comm_us, std::max(d / 2, d - c / 2) - 0.01);
    EXPECT_LT(r.exposed_comm_us, r.comm_us);  // overlap hides part of it
    EXPECT_NEAR(r.layer_us, r.compute_max_us + r.exposed_comm_us, 1e-9);
    EXPECT_LT(r.step_ms, base[i].step_ms);
  }
  // The crossover marker (a2a over expert compute above 1) shows for overlapped scenarios too,
  // at the same batch as without overlap.
  EXPECT_GT(crossover(rows, true), 4);
  EXPECT_EQ(crossover(rows, true), crossover(base, true));
  EXPECT_EQ(crossover(rows, false), crossover(base, false));
}

// The study runs the scenario's network model ([network] model); it used to swap "simgrid" for
// "bottleneck" silently. The tiny model as EP16 over two nodes of the 8x8 H800 cluster, where
// the models disagree on inter-node flows.
TEST(LayerStudy, UsesTheScenariosNetworkModel) {
  Scenario sc =
      load_scenario(std::string(MOESIM_SOURCE_DIR) + "/tests/data/scenarios/tiny_synthetic.toml");
  sc.topology = std::make_shared<const Topology>(
      load_topology(std::string(MOESIM_SOURCE_DIR) + "/topologies/h800-8x8.toml"));
  sc.deployment.gpus_per_replica = 16;
  auto comm_of = [&](const std::string& model) {
    Scenario s = sc;
    s.network_model = model;
    return run_layer_study(s, {64}, 4096, 1).front().comm_us;
  };
  const double bottleneck = comm_of("bottleneck");
  EXPECT_GT(bottleneck, 0);
  EXPECT_NE(comm_of("fluid"), bottleneck);
#ifdef MOESIM_HAVE_SIMGRID
  EXPECT_NE(comm_of("simgrid"), bottleneck);
#endif
}

// The micro-batch schedules on the teaching case (uniform routing: the GPUs are alike): the layer
// takes at least its slowest GPU's compute (to 2%: layers overlap each other, and the per-layer
// maximum over GPUs averages above any one GPU's) and at most that plus the all-to-all; the
// all-to-all is the barrier run's plus the micro-batches' second fixed costs (two collectives of
// half the traffic each: at least the whole one, at most 20% more at these batches); and the
// timeline lists GPU 0's stages of the middle MoE layer per micro-batch in start order.
TEST(LayerStudy, MicrobatchSchedulesShowTheirTimeline) {
  for (OverlapMode mode : {OverlapMode::kTwoMicrobatch, OverlapMode::kDecodePipeline}) {
    SCOPED_TRACE(overlap_mode_name(mode));
    Scenario sc = teaching_crossover();
    const auto base = run_layer_study(sc, {16, 128}, 4096, 1);
    sc.deployment.overlap = mode;
    std::vector<LayerStudySpan> timeline;
    LayerStudyOptions o;
    o.timeline = &timeline;
    const auto rows = run_layer_study(sc, {16, 128}, o);
    ASSERT_EQ(rows.size(), 4u);
    for (size_t i = 2; i < 4; ++i) {  // uniform
      const LayerStudyRow& r = rows[i];
      EXPECT_GE(r.layer_us, 0.98 * r.compute_max_us);
      EXPECT_LE(r.layer_us, r.compute_max_us + r.comm_us + 0.01);
      EXPECT_GE(r.comm_us, 0.999 * base[i].comm_us);
      EXPECT_LE(r.comm_us, 1.2 * base[i].comm_us);
      EXPECT_LT(r.layer_us, base[i].layer_us + base[i].compute_max_us);
    }
    ASSERT_FALSE(timeline.empty());
    for (size_t i = 1; i < timeline.size(); ++i) {
      EXPECT_LE(timeline[i - 1].start_us, timeline[i].start_us);
    }
    auto has = [&](const std::string& name) {
      return std::any_of(timeline.begin(), timeline.end(),
                         [&](const LayerStudySpan& s) { return s.name == name; });
    };
    for (const char* name : {"attention/mb0", "attention/mb1", "dispatch/mb0", "dispatch/mb1",
                             "experts/mb0", "combine/mb1", "shared_experts/mb1"}) {
      EXPECT_TRUE(has(name)) << name;
    }
    EXPECT_EQ(has("attention_prep/mb0"), mode == OverlapMode::kDecodePipeline);
  }
}

// SM sharing (docs/serving.md): the teaching case (direct dispatch over 8 nodes: NCCL's 16 SMs)
// under two_microbatch reports the compute time lost per GPU and layer; no GPU loses more than
// the collectives' time x 16 / 132 (all of it under compute), and with comm_sms = 0 nothing is
// lost and compute is shorter.
TEST(LayerStudy, SmSharingIsReportedPerLayer) {
  Scenario sc = teaching_crossover();
  sc.deployment.overlap = OverlapMode::kTwoMicrobatch;
  ASSERT_EQ(sc.deployment.comm_sms, 16);
  ASSERT_EQ(sc.topology->gpu_spec().num_sms, 132);
  std::vector<LayerStudySpan> timeline;
  LayerStudyOptions o;
  o.timeline = &timeline;
  const auto shared = run_layer_study(sc, {128}, o);
  sc.deployment.comm_sms = 0;
  const auto alone = run_layer_study(sc, {128}, 4096, 1);
  ASSERT_EQ(shared.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(shared[i].sm_lost_mean_us, 0);
    EXPECT_LE(shared[i].sm_lost_mean_us, shared[i].comm_us * 16 / 132 + 1e-3);
    EXPECT_GT(shared[i].compute_max_us, alone[i].compute_max_us);
    EXPECT_EQ(alone[i].sm_lost_mean_us, 0);
  }
  double lost = 0;
  for (const LayerStudySpan& sp : timeline) {
    EXPECT_GE(sp.sm_lost_us, 0);
    EXPECT_LT(sp.sm_lost_us, sp.duration_us);
    lost += sp.sm_lost_us;
  }
  EXPECT_GT(lost, 0);
}

// With [speculative] (MTP, k = 1), the study's decode step verifies 1 + k tokens per sequence and
// runs the draft pass: exactly the step a StepModel built as replica 0's runs on those slices with
// the scenario's speculative decoding. Without the table the same scenario's step is shorter (no
// draft pass, one token per sequence).
TEST(LayerStudy, SpeculativeScenarioStepsVerifyAndDraft) {
  const Scenario sc =
      load_scenario(std::string(MOESIM_SOURCE_DIR) + "/scenarios/speculative/dsv3-mtp.toml");
  ASSERT_TRUE(sc.speculative.enabled);
  const int32_t k = sc.speculative.num_draft_tokens;
  ASSERT_EQ(k, 1);
  const int64_t batch = 16, context = 5000;
  const auto rows = run_layer_study(sc, {batch}, context, 1);
  ASSERT_EQ(rows.size(), 2u);

  const ReplicaBuilder builder(sc);
  const auto placement = builder.static_placements(builder.make_routing(sc.routing, 1).get());
  const auto network = builder.make_network();
  const auto routing = builder.make_routing(sc.routing, 1);
  StepModelUse use;
  use.speculative = true;
  auto model =
      builder.make_step_model(*sc.model, builder.replica_gpus(0), placement.get(), network.get(),
                              routing.get(), builder.step_model_options(*sc.model, use));
  ASSERT_EQ(model->options().speculative.num_draft_tokens, k);
  std::vector<std::vector<SeqSlice>> ranks(static_cast<size_t>(model->num_ranks()));
  for (auto& r : ranks) r.assign(batch, SeqSlice{1 + k, context, false});
  const StepResult& res = model->run(0, ranks, nullptr);
  EXPECT_GT(res.draft_ns, 0);
  EXPECT_DOUBLE_EQ(rows[0].step_ms, to_ms(res.duration_ns));

  const Scenario plain =
      load_scenario(std::string(MOESIM_SOURCE_DIR) + "/scenarios/speculative/dsv3-no-mtp.toml");
  const auto plain_rows = run_layer_study(plain, {batch}, context, 1);
  EXPECT_GT(rows[0].step_ms, plain_rows[0].step_ms);
}

}  // namespace
}  // namespace moesim::sim::study
