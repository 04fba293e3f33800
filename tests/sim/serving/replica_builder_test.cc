// The replica builder and the five uses that build step models through it: the cluster, the
// policy context (a policy replacing a replica's routed experts), the layer study, the pruning
// study and validation's re-simulation. For the same inputs every use must give the same step
// durations. The scenario is calibrated (a profile with fitted ops), so a use that priced with the
// roofline or ran on another topology would differ.
#include "sim/serving/replica_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "sim/calibration/resimulate.h"
#include "sim/calibration/step_trace_reader.h"
#include "sim/config/config_error.h"
#include "sim/model/model_card_parser.h"
#include "sim/output/run_outputs.h"
#include "sim/policy/expert_pruning_deployment.h"
#include "sim/policy/pruned_routing.h"
#include "sim/routing/routing_trace.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/serving/cluster.h"
#include "sim/serving/serving_policy.h"
#include "sim/study/layer_study.h"
#include "sim/study/pruning_study.h"
#include "tests/sim/serving/test_scenarios.h"
#include "tests/support/config_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim {
namespace {

using output::write_step_trace;
using study::LayerStudyRow;
using study::PruningStudy;
using study::PruningStudyOptions;
using study::run_layer_study;
using study::run_pruning_study;

const std::string kScenarioDir = MOESIM_SOURCE_DIR "/tests/data/scenarios/";

// tests/data/scenarios/tiny_synthetic.toml with `deployment` keys added to its [deployment]
// table and `extra` tables appended.
Scenario tiny_synthetic(const std::string& deployment, const std::string& extra,
                        const std::string& name) {
  std::string text;
  std::FILE* f = std::fopen((kScenarioDir + "tiny_synthetic.toml").c_str(), "rb");
  EXPECT_NE(f, nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  const size_t at = text.find("[deployment]\n");
  EXPECT_NE(at, std::string::npos);
  text.insert(at + 13, deployment);
  return parse_scenario_text(text + extra, name, kScenarioDir);
}

// tiny_synthetic priced by the shipped CPU profile (fitted ops; the roofline is the fallback).
const Scenario& calibrated_scenario() {
  static const Scenario sc =
      tiny_synthetic("",
                     "\n[cost]\nmodel = \"calibrated\"\nprofile = \"" MOESIM_SOURCE_DIR
                     "/profiles/cpu-amd-epyc.toml\"\n",
                     "tiny_synthetic+calibrated");
  return sc;
}

// A decode batch: n sequences per attention rank at `context` tokens.
std::vector<std::vector<SeqSlice>> decode_batch(const StepModel& m, int64_t n, int64_t context) {
  return std::vector<std::vector<SeqSlice>>(
      m.num_ranks(), std::vector<SeqSlice>(static_cast<size_t>(n), SeqSlice{1, context, false}));
}

TEST(ReplicaBuilder, ResolvesTheScenariosCostModel) {
  const Scenario& sc = calibrated_scenario();
  ASSERT_EQ(sc.cost.kind, CostModelKind::kCalibrated);
  ASSERT_NE(sc.cost.profile, nullptr);
  ReplicaBuilder b(sc);
  EXPECT_EQ(b.cost().name(), "calibrated");
  EXPECT_EQ(ReplicaBuilder(testing::test_scenario("tiny_synthetic")).cost().name(), "roofline");
}

TEST(ReplicaBuilder, ReplicaGpusAndRoutingSeedFollowTheNamingRule) {
  ReplicaBuilder b(calibrated_scenario());
  const int32_t g = calibrated_scenario().deployment.gpus_per_replica;
  const std::vector<GpuId> gpus = b.replica_gpus(2);
  ASSERT_EQ(static_cast<int32_t>(gpus.size()), g);
  EXPECT_EQ(gpus.front().value, 2 * g);
  EXPECT_EQ(ReplicaBuilder::routing_seed(5, 1), RngStream(5, "routing.replica.1").next_u64());
  EXPECT_NE(ReplicaBuilder::routing_seed(5, 1), ReplicaBuilder::routing_seed(5, 0));
}

// Every replica routes on the popularity replica 0 draws (one shared object) with draws of its
// own seed: the same hot experts, their own routing per step; replica 0's routing is the plain
// model of its seed. A builder asked for another root seed draws another popularity.
TEST(ReplicaBuilder, ReplicasShareThePopularityAndDrawTheirOwnRouting) {
  const Scenario sc = testing::test_scenario("tiny_synthetic");
  ReplicaBuilder b(sc);
  const std::unique_ptr<RoutingModel> r0 = b.make_replica_routing(0, 9);
  const std::unique_ptr<RoutingModel> r1 = b.make_replica_routing(1, 9);
  const std::unique_ptr<RoutingModel> plain0 = b.make_routing(ReplicaBuilder::routing_seed(9, 0));
  const std::unique_ptr<RoutingModel> plain1 = b.make_routing(ReplicaBuilder::routing_seed(9, 1));
  auto& s0 = dynamic_cast<SyntheticRoutingModel&>(*r0);
  auto& s1 = dynamic_cast<SyntheticRoutingModel&>(*r1);
  EXPECT_EQ(s0.shared_popularity(), s1.shared_popularity());
  EXPECT_EQ(s0.shared_popularity()->seed(), ReplicaBuilder::routing_seed(9, 0));
  auto shares = [](RoutingModel& m) {
    const std::span<const double> s = m.expected_shares(0, 0);
    return std::vector<double>(s.begin(), s.end());
  };
  EXPECT_EQ(shares(*r1), shares(*r0));
  EXPECT_NE(shares(*plain1), shares(*r0));  // the old per-replica popularity: another hot set
  const std::vector<int32_t> tokens(4, 50);
  CountMatrix x0, x1, p0;
  r0->route({3, 0, tokens, {}}, x0);
  r1->route({3, 0, tokens, {}}, x1);
  plain0->route({3, 0, tokens, {}}, p0);
  EXPECT_EQ(x0, p0);
  EXPECT_NE(x0, x1);
  const std::unique_ptr<RoutingModel> other = b.make_replica_routing(1, 10);
  EXPECT_NE(dynamic_cast<SyntheticRoutingModel&>(*other).shared_popularity()->seed(),
            s0.shared_popularity()->seed());
  EXPECT_EQ(dynamic_cast<SyntheticRoutingModel&>(*other).shared_popularity()->seed(),
            ReplicaBuilder::routing_seed(10, 0));
}

TEST(ReplicaBuilder, TheClusterRunsTheBuildersReplica) {
  const Scenario& sc = calibrated_scenario();
  RunOptions opt;
  opt.record_steps = true;
  opt.record_max_steps = 20;
  const RunOutput out = run_scenario(sc, opt);
  ASSERT_GE(out.steps.size(), 5u);
  ReplicaBuilder b(sc);
  std::vector<ReplicaParts> replicas;
  for (int32_t r = 0; r < sc.deployment.num_replicas; ++r)
    replicas.push_back(b.build(r, sc.run.seed));
  // Re-run every recorded step through the builder's replica: same batch, same duration. Steps
  // of a replica come in order, so each step model sees the steps the cluster's saw.
  for (const StepRecord& rec : out.steps) {
    ReplicaParts& p = replicas[rec.replica];
    std::vector<std::vector<SeqSlice>> ranks(p.step_model->num_ranks());
    const int32_t tp = p.step_model->num_gpus() / p.step_model->num_ranks();
    for (const StepRecord::Seq& s : rec.seqs) {
      const int32_t local = s.gpu - p.gpus.front().value;
      ranks[local / tp].push_back(SeqSlice{s.new_tokens, s.context_tokens, s.prefill});
    }
    EXPECT_EQ(p.step_model->run(rec.step, ranks, nullptr).duration_ns, rec.end_ns - rec.start_ns)
        << "replica " << rec.replica << " step " << rec.step;
  }
}

// The replicas of one card share one routed-expert memo (a pure function of the card and the
// cost model); a model of another card object keeps its own, and sharing across cards is
// refused. Shared or not, a replica's steps take the same time (TheClusterRunsTheBuildersReplica
// re-runs the cluster's steps through replicas that share it).
TEST(ReplicaBuilder, ReplicasOfOneCardShareTheirExpertMemo) {
  // The roofline (the calibrated model counts its queries for validation: no memo there).
  const Scenario sc = testing::test_scenario("tiny_synthetic");
  ReplicaBuilder b(sc);
  // Two replicas (of the same index: the small topology holds one).
  ReplicaParts r0 = b.build(0, sc.run.seed), r1 = b.build(0, sc.run.seed);
  ASSERT_NE(r0.step_model->expert_memo(), nullptr);
  EXPECT_EQ(r0.step_model->expert_memo(), r1.step_model->expert_memo());
  const ModelCard other_card = *sc.model;  // equal, but another object
  const std::unique_ptr<StepModel> other = b.make_step_model(
      other_card, b.replica_gpus(0), r0.placements.get(), r0.network.get(), r0.routing.get());
  ASSERT_NE(other->expert_memo(), nullptr);
  EXPECT_NE(other->expert_memo(), r0.step_model->expert_memo());
  StepModelOptions shared = b.step_model_options(*sc.model, {});
  EXPECT_DEATH(b.make_step_model(other_card, b.replica_gpus(0), r0.placements.get(),
                                 r0.network.get(), r0.routing.get(), shared),
               "different cards");
  // Replica 1 reading the entries replica 0 wrote times its step as a replica with a memo of
  // its own does (a fresh builder's only replica).
  ReplicaBuilder fresh(sc);
  ReplicaParts alone = fresh.build(0, sc.run.seed);
  const auto batch = decode_batch(*alone.step_model, 3, 200);
  r0.step_model->run(0, batch, nullptr);
  EXPECT_EQ(r1.step_model->run(0, batch, nullptr).duration_ns,
            alone.step_model->run(0, batch, nullptr).duration_ns);
}

// A policy that replaces replica 0's routed experts with the same card, the static placement
// and routing seeded like the cluster's: the run must not change.
class SameExpertsPolicy final : public ServingPolicy {
 public:
  SameExpertsPolicy(const Scenario& sc, const ReplicaBuilder& b)
      : card_(*sc.model),
        placement_(b.static_placement()),
        routing_(b.make_routing(ReplicaBuilder::routing_seed(sc.run.seed, 0))) {}
  std::string_view name() const override { return "same_experts"; }
  void on_start(PolicyContext& ctx) override {
    ctx.actions.replace_routed_experts(0, card_, *placement_, routing_.get());
  }

 private:
  const ModelCard& card_;
  std::unique_ptr<ExpertPlacement> placement_;
  std::unique_ptr<RoutingModel> routing_;
};

// The builder builds a run's replica whole and rebuilds it the same way: speculative decoding
// with a draft model on two GPUs of its own, a check replica on the other fidelity, then the routed
// experts pruned (as the expert-pruning policy does before the first step). The KV pool stays
// capped by what the draft GPUs hold the draft KV of, before and after the rebuild: pruning frees
// target HBM, which must not lift the pool above the draft GPUs' cap.
TEST(ReplicaBuilder, BuildsAndRebuildsSpeculativeReplicasWithTheirCheckReplica) {
  Scenario sc = testing::test_scenario("tiny_mtp");
  sc.deployment.gpus_per_replica = 4;
  sc.speculative.method = SpeculativeMethod::kDraftModel;
  sc.speculative.draft_model = std::make_shared<const ModelCard>(
      load_model_card(testing::kScenarioDir + "models/tiny-dense.toml"));
  sc.speculative.draft_gpus = 2;
  ReplicaBuilder b(sc);
  IdWindow<Seq> seqs;
  ReplicaRunSetup setup;
  setup.root_seed = sc.run.seed;
  setup.check_fidelity = true;
  setup.seqs = &seqs;
  std::vector<Replica> replicas = b.build_replicas(setup);
  ASSERT_EQ(replicas.size(), 1u);
  Replica& r = replicas[0];
  // Every KV block of the 4 ranks needs its draft KV on one of the 2 draft GPUs.
  const double draft_weights = total_weight_bytes(*sc.speculative.draft_model);
  const double room = static_cast<double>(sc.topology->gpu_spec().hbm_bytes) *
                          (1 - sc.scheduler.hbm_reserve_fraction) -
                      sc.scheduler.workspace_gib * (1LL << 30) - draft_weights;
  const double per_block = kv_bytes_per_token(*sc.speculative.draft_model) *
                           static_cast<double>(sc.scheduler.kv_block_tokens) * 4 / 2;
  const auto cap = static_cast<int64_t>(std::floor(room / per_block));
  auto expect_whole = [&](const char* when) {
    SCOPED_TRACE(when);
    EXPECT_EQ(r.layout.num_kv_blocks, cap);
    EXPECT_EQ(r.scheduler->layout().num_kv_blocks, cap);
    const GpuId draft_gpus[] = {GpuId{4}, GpuId{5}};
    for (const StepModel* m : {r.parts.step_model.get(), r.check.step_model.get()}) {
      ASSERT_NE(m, nullptr);
      EXPECT_EQ(m->options().speculative.num_draft_tokens, 2);
      EXPECT_EQ(m->options().speculative.draft_model, sc.speculative.draft_model.get());
      EXPECT_TRUE(std::equal(m->options().speculative.draft_gpus.begin(),
                             m->options().speculative.draft_gpus.end(), std::begin(draft_gpus),
                             std::end(draft_gpus)));
    }
    EXPECT_NE(r.check.step_model->fast_fidelity(), r.step_model().fast_fidelity());
    EXPECT_EQ(r.step_model().options().background, r.transfers.get());
    EXPECT_EQ(r.check.step_model->options().background, nullptr);
  };
  expect_whole("built");
  // Pruned to top_k experts per MoE layer, re-packed over the 4 GPUs.
  const auto moe_layer = std::find_if(sc.model->layers.begin(), sc.model->layers.end(),
                                      [](const LayerSpec& l) { return l.ffn.is_moe; });
  ASSERT_NE(moe_layer, sc.model->layers.end());
  const MoeSpec& moe = moe_layer->ffn.moe;
  const double expert_bytes_before = r.layout.routed_expert_weight_bytes;
  const auto kept = static_cast<int32_t>(moe.top_k);
  const ModelCard pruned = pruned_model_card(*sc.model, kept);
  const ExpertPlacement placement =
      repacked_placement(kept, 4, 4, static_cast<int32_t>(moe.num_shared_experts));
  SyntheticRoutingModel routing(routing_shape_of(pruned), sc.routing, 1);
  // Without the cap the pruned replica's pool would be larger: the test can tell.
  LayerPlacements pruned_layers(static_cast<int32_t>(num_moe_layers(pruned)), placement);
  std::string error;
  ASSERT_GT(compute_gpu_memory_layout(pruned, b.memory_inputs(pruned, &pruned_layers), &error)
                .num_kv_blocks,
            cap);
  b.rebuild(r, pruned, placement, &routing, setup);
  expect_whole("rebuilt pruned");
  EXPECT_EQ(r.placements()->layer(0).num_experts(), kept);
  EXPECT_LT(r.layout.routed_expert_weight_bytes, expert_bytes_before);
}

TEST(ReplicaBuilder, ThePolicyContextRebuildsTheSameStepModel) {
  const Scenario& sc = calibrated_scenario();
  ReplicaBuilder b(sc);
  RunOptions opt;
  opt.record_steps = true;
  opt.record_max_steps = 20;
  const RunOutput plain = run_scenario(sc, opt);
  std::vector<std::unique_ptr<ServingPolicy>> policies;
  policies.push_back(std::make_unique<SameExpertsPolicy>(sc, b));
  const RunOutput replaced = run_scenario(sc, opt, -1, std::move(policies));
  ASSERT_EQ(plain.steps.size(), replaced.steps.size());
  for (size_t i = 0; i < plain.steps.size(); ++i) {
    EXPECT_EQ(plain.steps[i].end_ns - plain.steps[i].start_ns,
              replaced.steps[i].end_ns - replaced.steps[i].start_ns)
        << "step " << i;
  }
  EXPECT_EQ(replaced.counters.actions.at("routed_experts_replaced"), 1);
}

TEST(ReplicaBuilder, TheLayerStudyTimesTheBuildersStep) {
  const Scenario& sc = calibrated_scenario();
  const uint64_t seed = ReplicaBuilder::routing_seed(sc.run.seed, 0);
  const std::vector<LayerStudyRow> rows = run_layer_study(sc, {2, 16}, 1024, seed);
  ReplicaBuilder b(sc);
  for (const LayerStudyRow& row : rows) {
    if (!row.skewed) continue;
    ReplicaParts p = b.build(0, sc.run.seed);
    const SimTime d =
        p.step_model->run(0, decode_batch(*p.step_model, row.seqs_per_gpu, 1024), nullptr)
            .duration_ns;
    EXPECT_DOUBLE_EQ(row.step_ms, to_ms(d)) << row.seqs_per_gpu << " sequences per GPU";
  }
}

TEST(ReplicaBuilder, ThePruningStudyTimesTheBuildersStep) {
  const Scenario& sc = calibrated_scenario();
  PruningStudyOptions opt;
  opt.fractions = {0.0};
  opt.batch_per_gpu = 4;
  opt.context_tokens = 1024;
  opt.num_timed_steps = 3;
  opt.profile.profile_steps = 2;
  opt.profile.tokens_per_step = 256;
  const PruningStudy study = run_pruning_study(sc, opt);
  ASSERT_EQ(study.rows.size(), 1u);
  // Nothing pruned: the full card, every expert kept and re-packed, routing re-routing nothing.
  ReplicaBuilder b(sc);
  const RoutingShape shape = routing_shape_of(*sc.model);
  const int32_t g = sc.deployment.gpus_per_replica;
  const ModelCard card = pruned_model_card(*sc.model, shape.num_experts);
  const ExpertPlacement placement =
      repacked_placement(shape.num_experts, g, std::min(g, b.topology().gpus_per_node()),
                         static_cast<int32_t>(b.static_placement()->num_shared_experts()));
  const LayerPlacements placements(shape.num_moe_layers, placement);
  const PruningPlan plan = PruningPlan::from_layers(
      shape.num_experts, std::vector<std::vector<int32_t>>(shape.num_moe_layers));
  SyntheticRoutingModel inner(shape, sc.routing, ReplicaBuilder::routing_seed(sc.run.seed, 0));
  PrunedRoutingModel routing(inner, plan);
  const std::unique_ptr<NetworkModel> network = b.make_network();
  const std::unique_ptr<StepModel> m =
      b.make_step_model(card, b.replica_gpus(0), &placements, network.get(), &routing);
  double step_s = 0;
  for (int32_t i = 0; i < opt.num_timed_steps; ++i) {
    step_s += to_seconds(m->run(i, decode_batch(*m, opt.batch_per_gpu, 1024), nullptr).duration_ns);
  }
  EXPECT_DOUBLE_EQ(study.rows[0].decode_step_s, step_s / opt.num_timed_steps);
}

TEST(ReplicaBuilder, ValidationResimulatesTheRecordedDurations) {
  const Scenario& sc = calibrated_scenario();
  RunOptions opt;
  opt.record_steps = true;
  opt.record_max_steps = 20;
  const RunOutput out = run_scenario(sc, opt);
  const std::filesystem::path path = std::filesystem::path(scratch::path("trace.jsonl"));
  {
    std::ofstream f(path);
    write_step_trace(f, sc, out, sc.run.seed);
  }
  const StepTraceFile trace = read_step_trace(path.string());
  MeasurementSet meas;
  meas.file = "meas.jsonl";
  meas.mode = "replay";
  meas.trace_file = trace.file;
  for (size_t l = 0; l < sc.model->layers.size(); ++l) {
    meas.layer_scales[static_cast<int32_t>(l)] = 1;
  }
  for (const TraceStep& t : trace.steps) {
    StepSample sample;
    sample.step = t.step;
    meas.steps.push_back(sample);
  }
  // The scenario's own profile: the re-simulation prices exactly as the run did.
  const ValidationInput in = resimulate_recorded_steps(sc, *sc.cost.profile, meas, trace);
  ASSERT_EQ(in.steps.size(), out.steps.size());
  for (size_t i = 0; i < in.steps.size(); ++i) {
    const StepRecord& rec = out.steps[i];
    EXPECT_EQ(in.steps[i].step, rec.step);
    EXPECT_EQ(from_seconds(in.steps[i].duration_s), rec.end_ns - rec.start_ns) << "step " << i;
  }
  EXPECT_EQ(in.num_routing_mismatches, 0);
}

// placement = "eplb": every MoE layer balanced on its own from the replica's routing, with
// redundant slots filling every GPU evenly; memory charges the slots of every layer.
TEST(ReplicaBuilder, EplbPlacesEveryLayerOnItsOwn) {
  const Scenario sc =
      tiny_synthetic("placement = \"eplb\"\nredundant_slots = 8\n", "", "tiny_synthetic+eplb");
  ReplicaBuilder b(sc);
  ReplicaParts p = b.build(0, sc.run.seed);
  ASSERT_NE(p.placements, nullptr);
  const LayerPlacements& lp = *p.placements;
  const RoutingShape shape = routing_shape_of(*sc.model);
  ASSERT_EQ(lp.num_layers(), shape.num_moe_layers);
  const int32_t slots_per_gpu = (shape.num_experts + 8) / sc.deployment.gpus_per_replica;
  for (int32_t l = 0; l < lp.num_layers(); ++l) {
    EXPECT_EQ(lp.layer(l).total_slots(), shape.num_experts + 8);
    for (int32_t g = 0; g < lp.num_gpus(); ++g) EXPECT_EQ(lp.layer(l).num_slots(g), slots_per_gpu);
    // The layer's hottest expert (by the routing's expected shares) got a redundant slot.
    const std::span<const double> pi = p.routing->expected_shares(l, 0);
    const auto hot = static_cast<int32_t>(std::max_element(pi.begin(), pi.end()) - pi.begin());
    EXPECT_GE(lp.layer(l).replicas(hot).size(), 2u) << "layer " << l;
  }
  EXPECT_FALSE(lp.uniform());  // each layer has its own hot experts
  EXPECT_EQ(lp.max_total_slots_per_gpu(), int64_t{slots_per_gpu} * shape.num_moe_layers);
  const GpuMemoryInputs mem = b.memory_inputs(*sc.model, &lp);
  EXPECT_EQ(mem.routed_expert_slots, int64_t{slots_per_gpu} * shape.num_moe_layers);
}

TEST(ReplicaBuilder, EplbBalancesTheExpertLoadOfARun) {
  // tiny_synthetic's routing is Zipf-skewed with drift: the static layouts, balanced on step 0's
  // hot sets, cut the imbalance (1.99 -> 1.58 here; at its small batches much of it is sampling
  // noise that no placement removes).
  const Scenario contiguous = tiny_synthetic("", "", "tiny_synthetic");
  const Scenario eplb =
      tiny_synthetic("placement = \"eplb\"\nredundant_slots = 8\n", "", "tiny_synthetic+eplb");
  const RunOutput a = run_scenario(contiguous, RunOptions{});
  const RunOutput b = run_scenario(eplb, RunOptions{});
  EXPECT_TRUE(b.conservation_ok) << b.conservation_message;
  EXPECT_GT(a.summary.expert_imbalance, 0.0);
  EXPECT_LT(b.summary.expert_imbalance, 0.9 * a.summary.expert_imbalance);
  // Recorded, every MoE layer whose layout differs from layer 0's (the header's) is a placement
  // change of the first recorded step, and the trace reads back with them.
  RunOptions record;
  record.record_steps = true;
  record.record_max_steps = 5;
  const RunOutput rec = run_scenario(eplb, record);
  ASSERT_FALSE(rec.steps.empty());
  ASSERT_FALSE(rec.placement_changes.empty());
  for (const PlacementChange& c : rec.placement_changes) {
    EXPECT_EQ(c.step, rec.steps.front().step);
    EXPECT_GE(c.moe_layer, 1);  // layer 0 is the header's
    EXPECT_NE(c.expert_gpus, rec.expert_gpus);
  }
  const std::string path = scratch::path("eplb_trace.jsonl");
  {
    std::ofstream f(path);
    write_step_trace(f, eplb, rec, eplb.run.seed);
  }
  const StepTraceFile trace = read_step_trace(path);
  ASSERT_EQ(trace.placement_changes.size(), rec.placement_changes.size());
  for (const TracePlacementChange& c : trace.placement_changes) {
    EXPECT_GE(c.layer, 0);
    EXPECT_TRUE(eplb.model->layers.at(static_cast<size_t>(c.layer)).ffn.is_moe);
  }
}

// DeepSeek's decode unit as shipped: EP144 with 32 redundant experts runs, and every GPU's memory
// holds 2 slots per MoE layer (288 slots over 144 GPUs), one expert's weights each.
TEST(ReplicaBuilder, Ep144DecodeUnitHoldsTwoSlotsPerLayerPerGpu) {
  Scenario sc = load_scenario(MOESIM_SOURCE_DIR "/scenarios/deepseek-v3-ep144-eplb.toml");
  sc.run.duration_s = 0.3;
  const RunOutput out = run_scenario(sc, RunOptions{});
  ASSERT_TRUE(out.conservation_ok) << out.conservation_message;
  ASSERT_EQ(out.gpus.size(), 144u);
  const auto num_moe = static_cast<int64_t>(num_moe_layers(*sc.model));
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : sc.model->layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  for (const GpuRecord& g : out.gpus) {
    EXPECT_EQ(g.routed_expert_slots, 2 * num_moe) << "GPU " << g.gpu;
    EXPECT_EQ(g.num_moe_layers, num_moe);
    EXPECT_DOUBLE_EQ(g.routed_expert_weight_bytes,
                     2.0 * static_cast<double>(num_moe) * expert_weight_bytes(*sc.model, *moe));
  }
}

// placement = "eplb" with eplb_loads: the layout is balanced for the loads of a recorded routing
// trace (production telemetry in docs/schemas/routing_trace.md), not the routing model's. The
// trace makes expert 5 of MoE layer 0 and expert 11 of the others carry half of every token's
// selections: the redundant slots go to them.
TEST(ReplicaBuilder, EplbBalancesForTheLoadsOfARecordedTrace) {
  const Scenario plain = tiny_synthetic("", "", "tiny_synthetic");
  const RoutingShape shape = routing_shape_of(*plain.model);
  const int32_t num_src = plain.deployment.gpus_per_replica;
  const std::string path = scratch::path("loads.jsonl");
  {
    std::ofstream out(path);
    RoutingTraceWriter writer(
        out, RoutingTraceHeader{shape.num_moe_layers, shape.num_experts, num_src, shape.top_k});
    for (int64_t step = 0; step < 3; ++step) {
      for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
        CountMatrix m(num_src, shape.num_experts);
        const int32_t hot = l == 0 ? 5 : 11;
        for (int32_t src = 0; src < num_src; ++src) {
          m.at(src, hot) = 64;  // every token picks the hot expert, then one of the rest
          for (int32_t t = 0; t < 64 * (shape.top_k - 1); ++t) {
            int32_t e = (t + src) % (shape.num_experts - 1);
            if (e >= hot) ++e;
            m.at(src, e)++;
          }
        }
        writer.write(step, l, m);
      }
    }
  }
  const Scenario sc =
      tiny_synthetic("placement = \"eplb\"\nredundant_slots = 8\neplb_loads = \"" + path + "\"\n",
                     "", "tiny_synthetic+eplb_loads");
  ASSERT_TRUE(sc.deployment.eplb_loads);
  const ReplicaParts p = ReplicaBuilder(sc).build(0, sc.run.seed);
  const LayerPlacements& lp = *p.placements;
  EXPECT_GE(lp.layer(0).replicas(5).size(), 3u);
  EXPECT_EQ(lp.layer(0).replicas(11).size(), 1u);
  for (int32_t l = 1; l < lp.num_layers(); ++l) {
    EXPECT_GE(lp.layer(l).replicas(11).size(), 3u) << l;
    EXPECT_EQ(lp.layer(l).replicas(5).size(), 1u) << l;
  }
  // Bad input names the key: a trace of another shape, no file, no eplb placement.
  const std::string bad = scratch::path("bad_loads.jsonl");
  {
    std::ofstream out(bad);
    const int32_t experts = shape.num_experts / 2;
    RoutingTraceWriter w(out,
                         RoutingTraceHeader{shape.num_moe_layers, experts, num_src, shape.top_k});
    for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
      CountMatrix m(num_src, experts);
      for (int32_t src = 0; src < num_src; ++src) {
        for (int32_t e = 0; e < shape.top_k; ++e) m.at(src, e) = 1;
      }
      w.write(0, l, m);
    }
  }
  EXPECT_NE(testing::config_error_of([&] {
              tiny_synthetic("placement = \"eplb\"\neplb_loads = \"" + bad + "\"\n", "", "b");
            }).find("deployment.eplb_loads: " + bad + " has "),
            std::string::npos);
  EXPECT_NE(testing::config_error_of([&] {
              tiny_synthetic("placement = \"eplb\"\neplb_loads = \"no-such.jsonl\"\n", "", "b");
            }).find("deployment.eplb_loads: file not found"),
            std::string::npos);
  EXPECT_NE(testing::config_error_of([&] {
              tiny_synthetic("eplb_loads = \"" + path + "\"\n", "", "b");
            }).find("deployment.eplb_loads: needs placement = \"eplb\""),
            std::string::npos);
}

}  // namespace
}  // namespace moesim::sim
