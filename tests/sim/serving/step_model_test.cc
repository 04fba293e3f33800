// The step model on hand-checkable cases: the tiny card on small H200-like topologies built from
// a TopologySpec, with a fixed routing model (balanced, or every selection on one GPU) so that
// each comparison changes one thing.
#include "sim/serving/step_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/horizon.h"
#include "sim/cost/roofline.h"
#include "sim/model/model_card_parser.h"
#include "sim/network/network_model.h"
#include "sim/routing/synthetic_routing.h"
#include "tests/sim/serving/moe_layer_rig.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

const std::string kSource = MOESIM_SOURCE_DIR;

const ModelCard& tiny() {
  static const ModelCard card = load_model_card(kSource + "/models/tiny.toml");
  return card;
}
const ModelCard& tiny_dense() {
  static const ModelCard card =
      load_model_card(kSource + "/tests/data/scenarios/models/tiny-dense.toml");
  return card;
}

// One node of `num_gpus` H200s on NVLink (360 GB/s per direction).
Topology h200_node(int32_t num_gpus) {
  return build_topology(testing::nvlink_node_spec("h200-sxm", num_gpus, 360e9));
}

using testing::FixedRouting;

// A step model over `num_gpus` GPUs of one node; owns its dependencies.
struct Fixture {
  Fixture(const ModelCard& card, int32_t num_gpus, DeploymentSpec d, int32_t hot_gpu = -1)
      : Fixture(card, testing::nvlink_node_spec("h200-sxm", num_gpus, 360e9), d, hot_gpu) {}
  // The same over the GPUs of `spec`, priced by `cost_override` when given (else the roofline).
  Fixture(const ModelCard& card, TopologySpec spec, DeploymentSpec d, int32_t hot_gpu = -1,
          const CostModel* cost_override = nullptr)
      : topology(build_topology(std::move(spec))),
        cost(topology.gpu_spec(), RooflineParams::defaults()),
        deployment(d) {
    const int32_t num_gpus = topology.num_gpus();
    deployment.gpus_per_replica = num_gpus;
    std::vector<GpuId> gpus;
    for (int32_t g = 0; g < num_gpus; ++g) gpus.emplace_back(g);
    NetworkModel* net = nullptr;
    RoutingModel* rt = nullptr;
    if (num_moe_layers(card) > 0) {
      RoutingShape shape = routing_shape_of(card);
      // Contiguous: expert e on GPU e / (experts / GPUs).
      placement = std::make_unique<LayerPlacements>(
          shape.num_moe_layers,
          ExpertPlacement::contiguous(shape.num_experts, num_gpus, num_gpus, 1, "test"));
      network = NetworkModelRegistry().make("bottleneck", topology);
      routing = std::make_unique<FixedRouting>(shape, hot_gpu);
      fixed = static_cast<FixedRouting*>(routing.get());
      net = network.get();
      rt = routing.get();
    }
    card_ = &card;
    gpus_ = gpus;
    cost_ = cost_override ? cost_override : &cost;
    rebuild({});
  }
  // The step model again, over the same routing, network and placement, with `options`.
  void rebuild(StepModelOptions options) {
    model = std::make_unique<StepModel>(*card_, topology, deployment, gpus_, placement.get(),
                                        *cost_, network.get(), routing.get(), std::move(options));
  }
  // Options of the fast fidelity when `fast`, else the exact one.
  static StepModelOptions tier(bool fast) {
    StepModelOptions o;
    o.fidelity = fast ? Fidelity::kFast : Fidelity::kExact;
    return o;
  }
  const ModelCard* card_ = nullptr;
  std::vector<GpuId> gpus_;
  const CostModel* cost_ = nullptr;
  Topology topology;
  RooflineCostModel cost;
  DeploymentSpec deployment;
  std::unique_ptr<LayerPlacements> placement;
  std::unique_ptr<NetworkModel> network;
  std::unique_ptr<RoutingModel> routing;
  FixedRouting* fixed = nullptr;  // routing, as its class
  std::unique_ptr<StepModel> model;
};

// `per_rank` decode sequences with `context` cached tokens on each of `num_ranks` ranks.
std::vector<std::vector<SeqSlice>> decode_batch(int32_t num_ranks, int32_t per_rank,
                                                int64_t context) {
  return std::vector<std::vector<SeqSlice>>(
      num_ranks, std::vector<SeqSlice>(per_rank, SeqSlice{1, context, false}));
}

SimTime sum_at(const StepResult& r, size_t g) {
  return r.compute_ns[g] + r.comm_ns[g] + r.wait_ns[g];
}

class CountingObserver final : public StepObserver {
 public:
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    ++num_slices;
    max_end_ns = std::max(max_end_ns, start_ns + duration_ns);
    min_start_ns = std::min(min_start_ns, start_ns);
    if (duration_ns <= 0) ++num_empty;
  }
  void on_routing(int32_t layer_idx, int32_t moe_layer_idx, const CountMatrix& src_dst,
                  double dispatch_bytes, double combine_bytes) override {
    ++num_routing;
    row_sums.clear();
    for (int32_t s = 0; s < src_dst.num_rows(); ++s) row_sums.push_back(src_dst.row_sum(s));
  }
  int num_slices = 0, num_empty = 0, num_routing = 0;
  SimTime max_end_ns = 0, min_start_ns = 1LL << 62;
  std::vector<int64_t> row_sums;
};

// Dispatch and combine bytes of every MoE layer, as the observer sees them.
class ByteObserver final : public StepObserver {
 public:
  void on_routing(int32_t, int32_t, const CountMatrix&, double dispatch_bytes,
                  double combine_bytes) override {
    dispatch.push_back(dispatch_bytes);
    combine.push_back(combine_bytes);
  }
  std::vector<double> dispatch, combine;
};

TEST(StepModelTest, LowLatencyDispatchSendsEverySelection) {
  // 64 decode tokens per GPU, top-2, even routing over 8 GPUs: 16 selections per (source,
  // destination). Direct sends the unique tokens, 64 (1 - (1 - 1/8)^2) = 15 per pair; low latency
  // sends all 16 selections. Rows: FP8 dispatch 256 + 4 * 2 = 264 bytes, BF16 combine 512.
  DeploymentSpec ll;
  ll.dispatch = DispatchAlgorithm::kLowLatency;
  for (const auto& [deployment, per_pair] :
       {std::pair{DeploymentSpec{}, 15.0}, std::pair{ll, 16.0}}) {
    Fixture f(tiny(), 8, deployment);
    ByteObserver obs;
    f.model->run(0, decode_batch(8, 64, 100), &obs);
    ASSERT_EQ(obs.dispatch.size(), static_cast<size_t>(num_moe_layers(tiny())));
    for (size_t l = 0; l < obs.dispatch.size(); ++l) {
      EXPECT_EQ(obs.dispatch[l], 8 * 7 * per_pair * 264) << l;
      EXPECT_EQ(obs.combine[l], 8 * 7 * per_pair * 512) << l;
    }
  }
}

TEST(StepModelTest, KernelCostsAddAFixedTimeToEachCollective) {
  // Every GPU's comm time per MoE layer is dispatch + combine; with kernel costs (fixed 20 us for
  // dispatch, 30 us for combine) each MoE layer's comm grows by 50 us on every GPU, and so does
  // the step (the collectives are on every GPU's critical path between barriers).
  DeploymentSpec ll;
  ll.dispatch = DispatchAlgorithm::kLowLatency;
  Fixture plain(tiny(), 8, ll);
  Fixture costed(tiny(), 8, ll);
  StepModelOptions with_costs;
  with_costs.dispatch_kernel = {20e-6};
  with_costs.combine_kernel = {30e-6};
  costed.rebuild(with_costs);
  const StepResult a = plain.model->run(0, decode_batch(8, 64, 100), nullptr);
  const StepResult& b = costed.model->run(0, decode_batch(8, 64, 100), nullptr);
  const double layers = num_moe_layers(tiny());
  ASSERT_GT(layers, 0);
  for (size_t g = 0; g < 8; ++g) {
    EXPECT_NEAR(static_cast<double>(b.comm_ns[g] - a.comm_ns[g]), layers * 50e3, 2.0) << g;
  }
  EXPECT_NEAR(static_cast<double>(b.duration_ns - a.duration_ns), layers * 50e3, 2.0);
}

TEST(StepModelTest, ZeroTokensTakeZeroTime) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  CountingObserver obs;
  const StepResult& r = f.model->run(0, decode_batch(8, 0, 0), &obs);
  EXPECT_EQ(r.duration_ns, 0);
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(r.compute_ns[g], 0);
    EXPECT_EQ(r.comm_ns[g], 0);
    EXPECT_EQ(r.wait_ns[g], 0);
  }
  EXPECT_EQ(r.dispatch_bytes, 0);
  EXPECT_EQ(obs.num_slices, 0);
  EXPECT_EQ(obs.num_routing, 0);
}

TEST(StepModelTest, DecodeStepTimeGrowsWithBatch) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  SimTime prev = 0;
  for (int32_t batch : {1, 16, 256, 2048}) {
    SimTime d = f.model->run(0, decode_batch(8, batch, 1000), nullptr).duration_ns;
    EXPECT_GT(d, prev) << "batch " << batch;
    prev = d;
  }
}

TEST(StepModelTest, DecodeStepTimeGrowsWithContext) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  SimTime short_ctx = f.model->run(0, decode_batch(8, 256, 100), nullptr).duration_ns;
  SimTime long_ctx = f.model->run(0, decode_batch(8, 256, 4000), nullptr).duration_ns;
  EXPECT_GT(long_ctx, short_ctx);
}

TEST(StepModelTest, PrefillCostsMoreThanDecodeOfTheSameSequences) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  std::vector<std::vector<SeqSlice>> prefill(8, {SeqSlice{512, 0, true}});
  SimTime p = f.model->run(0, prefill, nullptr).duration_ns;
  SimTime d = f.model->run(0, decode_batch(8, 1, 512), nullptr).duration_ns;
  EXPECT_GT(p, d);
}

TEST(StepModelTest, GpuTimeAddsUpToTheStepWithoutOverlap) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  std::vector<std::vector<SeqSlice>> ranks = decode_batch(8, 4, 300);
  ranks[3].push_back(SeqSlice{700, 0, true});  // one rank much busier
  CountingObserver obs;
  const StepResult& r = f.model->run(0, ranks, &obs);
  for (size_t g = 0; g < 8; ++g) {
    EXPECT_NEAR(static_cast<double>(sum_at(r, g)), static_cast<double>(r.duration_ns), 4.0)
        << "gpu " << g;
  }
  // The busy rank makes everyone else wait.
  EXPECT_LT(r.wait_ns[3], r.wait_ns[0]);
  // Slices lie inside the step.
  EXPECT_GE(obs.min_start_ns, 0);
  EXPECT_LE(obs.max_end_ns, r.duration_ns + 2);
  EXPECT_EQ(obs.num_empty, 0);
}

TEST(StepModelTest, RoutingRowsSumToTopKTimesTokens) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  std::vector<std::vector<SeqSlice>> ranks = decode_batch(8, 3, 10);
  ranks[5].push_back(SeqSlice{40, 0, true});
  CountingObserver obs;
  f.model->run(0, ranks, &obs);
  EXPECT_EQ(obs.num_routing, 3);  // tiny: 3 MoE layers
  ASSERT_EQ(obs.row_sums.size(), 8u);
  for (int s = 0; s < 8; ++s) EXPECT_EQ(obs.row_sums[s], 2 * (s == 5 ? 43 : 3)) << s;
}

// [deployment] node_limited_traffic on both fidelities, by hand. The tiny card (3 MoE layers, 16
// experts, top-2 of 2 kept groups out of 4, hidden 256: FP8 rows of 264 B) over 2 nodes of 8
// GPUs, one expert per GPU, two whole groups per node; balanced routing, 64 prefill tokens per
// GPU. Each source sends 128 / 16 = 8 selections to every GPU, 8 unique tokens (exact fidelity:
// 64 (1 - (15/16)^2) = 7.75 rounded) or a reach of 1 - (15/16)^2 = 0.12109 (fast fidelity). Its
// relay row to the other node carries the unique (token, node) pairs: independent 64 (1 - (1 -
// r)^8), node-limited 64 a with a = 1 - C(2, 2) / C(4, 2) = 5/6 (both kept groups on the source's
// node in 1 case of 6). Everything else is unchanged.
TEST(StepModelTest, NodeLimitedTrafficChangesTheRelayRowsOnBothTiers) {
  const std::vector<std::vector<SeqSlice>> ranks(16, std::vector<SeqSlice>{SeqSlice{64, 0, true}});
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "exact");
    double bytes[2] = {0, 0};
    for (const bool limited : {false, true}) {
      DeploymentSpec d;
      d.dispatch = DispatchAlgorithm::kHierarchical;
      d.node_limited_traffic = limited;
      Fixture f(tiny(), testing::h800_sxm_cluster_spec(2, 2, 1, true), d);
      f.rebuild(Fixture::tier(fast));
      bytes[limited] = f.model->run(0, ranks, nullptr).dispatch_bytes;
    }
    const double r = fast ? 1.0 - (15.0 / 16) * (15.0 / 16) : 8.0 / 64;
    const double independent = 64 * (1 - std::pow(1 - r, 8));
    const double per_relay_row = 64 * 5.0 / 6 - independent;
    EXPECT_NEAR(bytes[1] - bytes[0], 16 * per_relay_row * 264 * 3, 1e-6 * bytes[0]);
    EXPECT_GT(bytes[1] - bytes[0], 0.05 * bytes[0]);
  }
}

// Host-link contention (StepInput's NIC slowdown, StepModelOptions::track_nic_bytes) on 2 nodes x
// 8: the NIC bytes each GPU reports add up in and out, and agree between the fidelities (balanced
// routing); slowing every GPU's NIC lengthens the step on both fidelities, the exact fidelity
// through the network model; clearing the slowdown (or factors of 1) gives the unslowed step back
// bit for bit.
TEST(StepModelTest, NicSlowdownLengthensTheStepAndNicBytesAddUp) {
  const std::vector<std::vector<SeqSlice>> ranks(16, std::vector<SeqSlice>{SeqSlice{64, 0, true}});
  double in_total[2] = {0, 0};
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast" : "exact");
    DeploymentSpec d;
    Fixture f(tiny(), testing::h800_sxm_cluster_spec(2, 2, 1, true), d);
    StepModelOptions o = Fixture::tier(fast);
    o.track_nic_bytes = true;
    f.rebuild(o);
    const StepResult base = f.model->run(0, ranks, nullptr);
    ASSERT_EQ(base.nic_in_bytes.size(), 16u);
    double in = 0, out = 0;
    for (size_t g = 0; g < 16; ++g) {
      EXPECT_GT(base.nic_in_bytes[g], 0) << g;
      in += base.nic_in_bytes[g];
      out += base.nic_out_bytes[g];
    }
    EXPECT_NEAR(in, out, 1e-9 * in);
    in_total[fast] = in;
    const std::vector<double> twice(16, 2.0), once(16, 1.0);
    const SimTime slowed = f.model->run(StepInput{0, &ranks, nullptr, twice, twice}).duration_ns;
    EXPECT_GT(slowed, base.duration_ns);
    EXPECT_EQ(f.model->run(StepInput{0, &ranks, nullptr, once, once}).duration_ns,
              base.duration_ns);
    // The slowdown is the step's only: the next step without one is the unslowed step.
    EXPECT_GT(f.model->run(StepInput{0, &ranks, nullptr, twice, twice}).duration_ns,
              base.duration_ns);
    EXPECT_EQ(f.model->run(0, ranks, nullptr).duration_ns, base.duration_ns);
  }
  EXPECT_NEAR(in_total[1], in_total[0], 0.05 * in_total[0]);
}

TEST(StepModelTest, HotExpertMakesColdGpusWaitAtTheBarrier) {
  Fixture balanced(tiny(), 8, DeploymentSpec{}, /*hot_gpu=*/-1);
  Fixture hot(tiny(), 8, DeploymentSpec{}, /*hot_gpu=*/0);
  auto ranks = decode_batch(8, 512, 500);
  StepResult b = balanced.model->run(0, ranks, nullptr);
  StepResult h = hot.model->run(0, ranks, nullptr);
  EXPECT_GT(h.duration_ns, b.duration_ns);
  EXPECT_GT(h.max_gpu_selections, b.max_gpu_selections);
  EXPECT_DOUBLE_EQ(h.mean_gpu_selections, b.mean_gpu_selections);
  for (int g = 1; g < 8; ++g) {
    // Cold GPUs wait for the hot one; the hot one hardly waits.
    EXPECT_GT(h.wait_ns[g], b.wait_ns[g]) << "gpu " << g;
    EXPECT_GT(h.wait_ns[g], h.wait_ns[0]) << "gpu " << g;
  }
  EXPECT_GT(h.compute_ns[0], b.compute_ns[0]);
}

TEST(StepModelTest, MicrobatchOverlapIsNeverSlower) {
  DeploymentSpec overlap;
  overlap.overlap = OverlapMode::kSimple;
  std::mt19937 rng(42);
  for (int32_t hot_gpu : {-1, 0}) {
    Fixture seq(tiny(), 8, DeploymentSpec{}, hot_gpu);
    Fixture ovl(tiny(), 8, overlap, hot_gpu);
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<std::vector<SeqSlice>> ranks(8);
      for (auto& r : ranks) {
        int n = std::uniform_int_distribution<int>(0, 40)(rng);
        for (int i = 0; i < n; ++i) {
          bool prefill = std::uniform_int_distribution<int>(0, 9)(rng) == 0;
          int64_t ctx = std::uniform_int_distribution<int64_t>(0, 3000)(rng);
          r.push_back(prefill
                          ? SeqSlice{std::uniform_int_distribution<int64_t>(1, 900)(rng), ctx, true}
                          : SeqSlice{1, ctx, false});
        }
      }
      SimTime a = seq.model->run(trial, ranks, nullptr).duration_ns;
      SimTime b = ovl.model->run(trial, ranks, nullptr).duration_ns;
      EXPECT_LE(b, a + 1) << "trial " << trial << " hot " << hot_gpu;
    }
  }
}

TEST(StepModelTest, OverlapHidesCommunication) {
  DeploymentSpec overlap;
  overlap.overlap = OverlapMode::kSimple;
  Fixture seq(tiny(), 8, DeploymentSpec{});
  Fixture ovl(tiny(), 8, overlap);
  auto ranks = decode_batch(8, 1024, 200);
  EXPECT_LT(ovl.model->run(0, ranks, nullptr).duration_ns,
            seq.model->run(0, ranks, nullptr).duration_ns);
}

TEST(StepModelTest, SyntheticRoutingIsDeterministicPerSeed) {
  Topology topo = h200_node(8);
  RooflineCostModel cost(topo.gpu_spec(), RooflineParams::defaults());
  RoutingShape shape = routing_shape_of(tiny());
  std::vector<GpuId> gpus;
  for (int g = 0; g < 8; ++g) gpus.emplace_back(g);
  const LayerPlacements placement(routing_shape_of(tiny()).num_moe_layers,
                                  ExpertPlacement::contiguous(16, 8, 8, 1, "test"));
  RoutingSpec spec;
  spec.defaults.popularity = PopularityKind::kZipf;
  auto run_with = [&](uint64_t seed) {
    auto net = NetworkModelRegistry().make("bottleneck", topo);
    SyntheticRoutingModel routing(shape, spec, seed);
    StepModel m(tiny(), topo, DeploymentSpec{}, gpus, &placement, cost, net.get(), &routing);
    std::vector<SimTime> out;
    for (int step = 0; step < 5; ++step) {
      out.push_back(m.run(step, decode_batch(8, 64, 100), nullptr).duration_ns);
    }
    return out;
  };
  EXPECT_EQ(run_with(1), run_with(1));
}

TEST(StepModelTest, DenseOnlyModelNeedsNoRoutingOrNetwork) {
  Fixture f(tiny_dense(), 1, DeploymentSpec{});
  CountingObserver obs;
  SimTime small = f.model->run(0, decode_batch(1, 1, 100), &obs).duration_ns;
  SimTime big = f.model->run(0, decode_batch(1, 512, 100), nullptr).duration_ns;
  EXPECT_GT(small, 0);
  EXPECT_GT(big, small);
  EXPECT_EQ(obs.num_routing, 0);
  EXPECT_GT(obs.num_slices, 0);
  EXPECT_EQ(f.model->run(0, decode_batch(1, 0, 0), nullptr).duration_ns, 0);
}

// A draft model on GPUs of its own (SpeculativeSetup::draft_gpus): with one draft GPU per target
// rank each does what the co-located GPU did, so the draft passes take as long plus the token ids'
// round trip (twice the route latency), on the draft GPUs instead of the target's, which wait; with
// half as many draft GPUs each drafts for two sequences and the passes take longer.
TEST(StepModelTest, DraftModelOnItsOwnGpusTakesTheDraftsOffTheTarget) {
  const Topology topo = build_topology(testing::nvlink_node_spec("h200-sxm", 8, 360e9));
  const RooflineCostModel cost(topo.gpu_spec(), RooflineParams::defaults());
  DeploymentSpec d;
  d.gpus_per_replica = 4;
  const std::vector<GpuId> gpus = {GpuId{0}, GpuId{1}, GpuId{2}, GpuId{3}};
  // A step model drafting with tiny_dense on `draft_gpus` (empty: co-located).
  auto with_drafts = [&](std::vector<GpuId> draft_gpus) {
    StepModelOptions o;
    o.speculative.num_draft_tokens = 1;
    o.speculative.draft_model = &tiny_dense();
    o.speculative.draft_gpus = std::move(draft_gpus);
    return std::make_unique<StepModel>(tiny_dense(), topo, d, gpus, nullptr, cost, nullptr, nullptr,
                                       o);
  };
  const std::vector<std::vector<SeqSlice>> ranks(4, {SeqSlice{2, 100, false}});
  const StepResult colocated = with_drafts({})->run(0, ranks, nullptr);
  ASSERT_GT(colocated.draft_ns, 0);
  const StepResult own =
      with_drafts({GpuId{4}, GpuId{5}, GpuId{6}, GpuId{7}})->run(0, ranks, nullptr);
  const SimTime round_trip = 2 * topo.route_latency_ns(GpuId{0}, GpuId{4});
  EXPECT_NEAR(static_cast<double>(own.draft_ns),
              static_cast<double>(colocated.draft_ns + round_trip), 2.0);
  ASSERT_EQ(own.draft_gpu_busy_ns.size(), 4u);
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(static_cast<double>(own.draft_gpu_busy_ns[j]),
                static_cast<double>(colocated.draft_ns), 2.0);
    EXPECT_LT(own.compute_ns[j], colocated.compute_ns[j]);  // the drafts left the target
    EXPECT_GT(own.wait_ns[j], colocated.wait_ns[j]);
  }
  const StepResult two = with_drafts({GpuId{4}, GpuId{5}})->run(0, ranks, nullptr);
  EXPECT_GT(two.draft_ns, own.draft_ns);
  EXPECT_EQ(two.draft_gpu_busy_ns.size(), 2u);
  EXPECT_EQ(two.draft_gpu_busy_ns[0], two.draft_gpu_busy_ns[1]);
}

TEST(StepModelTest, TensorParallelRanksShareTheDenseFfnEvenly) {
  // One decode token on a TP-2 rank: both GPUs of the group run the same TP-split kernels.
  DeploymentSpec tp;
  tp.attention = AttentionParallel::kTensor;
  tp.attention_tp = 2;
  Fixture f(tiny_dense(), 2, tp);
  ASSERT_EQ(f.model->num_ranks(), 1);
  for (int32_t batch : {1, 3}) {
    const StepResult& r = f.model->run(0, decode_batch(1, batch, 100), nullptr);
    EXPECT_EQ(r.compute_ns[0], r.compute_ns[1]) << "batch " << batch;
    EXPECT_GT(r.duration_ns, 0);
  }
}

TEST(StepModelTest, TensorParallelAttentionIsFasterPerRank) {
  // The same sequences on one TP-2 rank take less time than on one GPU alone.
  DeploymentSpec tp;
  tp.attention = AttentionParallel::kTensor;
  tp.attention_tp = 2;
  Fixture one(tiny_dense(), 1, DeploymentSpec{});
  Fixture two(tiny_dense(), 2, tp);
  std::vector<std::vector<SeqSlice>> prefill(1, {SeqSlice{2048, 0, true}});
  EXPECT_LT(two.model->run(0, prefill, nullptr).duration_ns,
            one.model->run(0, prefill, nullptr).duration_ns);
}

// Each MoE layer is dispatched with its own placement: a replica of expert 0 on GPU 7 in the
// second MoE layer changes that layer's destinations only.
class ColumnSums final : public StepObserver {
 public:
  void on_routing(int32_t, int32_t moe_layer_idx, const CountMatrix& src_dst, double,
                  double) override {
    if (static_cast<size_t>(moe_layer_idx) >= received.size()) received.resize(moe_layer_idx + 1);
    received[moe_layer_idx].assign(src_dst.num_cols(), 0);
    src_dst.col_sums(received[moe_layer_idx]);
  }
  std::vector<std::vector<int64_t>> received;  // per MoE layer, selections per destination GPU
};

TEST(StepModelTest, EveryMoeLayerUsesItsOwnPlacement) {
  DeploymentSpec d;
  Fixture f(tiny(), 8, d);
  const int32_t num_moe = f.placement->num_layers();
  ASSERT_GE(num_moe, 2);
  ExpertPlacement replicated = f.placement->layer(1);  // layer 1: experts 0, 1 also on GPU 7
  replicated.add_replica(0, 7);
  replicated.add_replica(1, 7);
  f.placement->set_layer(1, replicated);
  EXPECT_FALSE(f.placement->uniform());
  EXPECT_EQ(f.placement->total_slots(7), 2 * num_moe + 2);
  EXPECT_EQ(f.placement->max_total_slots_per_gpu(), 2 * num_moe + 2);
  ColumnSums obs;
  f.model->run(0, decode_batch(8, 8, 100), &obs);
  ASSERT_EQ(static_cast<int32_t>(obs.received.size()), num_moe);
  // 8 sources x 8 tokens x top_k 2 = 128 selections, spread i % 16 over experts: 8 per expert.
  // Layer 0: GPUs 0 and 7 hold 2 experts each. Layer 1: experts 0 and 1 go to the less loaded of
  // GPUs 0 and 7 (ties to GPU 0): 1 and 3 after source 0, then level, 16 each at the end.
  EXPECT_EQ(obs.received[0][0], 16);
  EXPECT_EQ(obs.received[0][7], 16);  // experts 14, 15
  EXPECT_EQ(obs.received[1][0] + obs.received[1][7], 32);
  EXPECT_NE(obs.received[1], obs.received[0]);
  for (int32_t l = 2; l < num_moe; ++l) EXPECT_EQ(obs.received[l], obs.received[0]);
}

// Per-layer balance by GPU, hand-computed (tiny: 3 MoE layers, 16 experts, top_k 2, 2 experts per
// GPU on 8 GPUs): every selection on GPU 0 gives, per layer, max 64 over mean 8.
TEST(StepModelTest, BalanceByGpuIsPerLayerMaxOverMean) {
  Fixture hot(tiny(), 8, DeploymentSpec{}, /*hot_gpu=*/0);
  const StepResult& h = hot.model->run(0, decode_batch(8, 4, 100), nullptr);  // 64 selections
  EXPECT_EQ(h.num_gpu_balance_layers, 3);
  EXPECT_DOUBLE_EQ(h.gpu_imbalance_sum, 3 * (64.0 - 8.0) / 8.0);
  EXPECT_DOUBLE_EQ(h.gpu_balancedness_sum, 3 * 8.0 / 64.0);
  // Spread evenly per source, the remainder to the lowest GPUs: one token per source (2
  // selections) puts 8 selections on GPUs 0 and 1 and none elsewhere: max 8, mean 2.
  Fixture spread(tiny(), 8, DeploymentSpec{});
  const StepResult& b = spread.model->run(0, decode_batch(8, 1, 100), nullptr);
  EXPECT_EQ(b.num_gpu_balance_layers, 3);
  EXPECT_DOUBLE_EQ(b.gpu_imbalance_sum, 3 * (8.0 - 2.0) / 2.0);
  EXPECT_DOUBLE_EQ(b.gpu_balancedness_sum, 3 * 2.0 / 8.0);
  // Perfectly even: r = 0, b = 1. FixedRouting states no expectation: no slot figure.
  const StepResult& e = spread.model->run(1, decode_batch(8, 8, 100), nullptr);
  EXPECT_EQ(e.num_gpu_balance_layers, 3);
  EXPECT_DOUBLE_EQ(e.gpu_imbalance_sum, 0.0);
  EXPECT_DOUBLE_EQ(e.gpu_balancedness_sum, 3.0);
  EXPECT_EQ(e.num_slot_balance_layers, 0);
  // A step without tokens has no sample (the sums restart every step).
  const StepResult& z = hot.model->run(1, decode_batch(8, 0, 0), nullptr);
  EXPECT_EQ(z.num_gpu_balance_layers, 0);
  EXPECT_EQ(z.gpu_imbalance_sum, 0.0);
  EXPECT_EQ(z.gpu_balancedness_sum, 0.0);
}

// By slot where the layer has replicas: the dispatcher's per-slot counts. Layer 1 has a replica
// of expert 0 on GPU 7 (8 selections per expert, one per source; GPUs 0 and 7 tie before each
// source's expert-0 selection, so all 8 go to GPU 0): 17 slots {8, 0, 8 x 15}, mean 128 / 17,
// max 8. Layers 0 and 2 take the fast path, where FixedRouting states no expectation: not
// counted.
TEST(StepModelTest, BalanceBySlotUsesTheDispatchedSlotLoads) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  ExpertPlacement replicated = f.placement->layer(1);
  replicated.add_replica(0, 7);
  f.placement->set_layer(1, replicated);
  const StepResult& r = f.model->run(0, decode_batch(8, 8, 100), nullptr);
  EXPECT_EQ(r.num_slot_balance_layers, 1);
  const double mean = 128.0 / 17.0;
  EXPECT_DOUBLE_EQ(r.slot_imbalance_sum, (8.0 - mean) / mean);
  EXPECT_DOUBLE_EQ(r.slot_balancedness_sum, mean / 8.0);
}

// By slot on the fast path: the routing model's expected shares, split evenly over an expert's
// replicas. Expert 0 takes 1 selection per token, the 15 others 1/15 each (sum top_k = 2): 16
// slots, max 1, mean 1/8. With a replica of expert 0 in layer 1 (destinations reported, so no
// dispatch): 17 slots, max 1/2, mean 2/17.
TEST(StepModelTest, BalanceBySlotOnTheFastPathIsTheExpectation) {
  Fixture f(tiny(), 8, DeploymentSpec{});
  f.fixed->expected.assign(16, 1.0 / 15.0);
  f.fixed->expected[0] = 1.0;
  const StepResult& a = f.model->run(0, decode_batch(8, 8, 100), nullptr);
  EXPECT_EQ(a.num_slot_balance_layers, 3);
  EXPECT_NEAR(a.slot_imbalance_sum, 3 * (1.0 - 0.125) / 0.125, 1e-12);
  EXPECT_NEAR(a.slot_balancedness_sum, 3 * 0.125, 1e-12);

  f.fixed->destinations = true;
  ExpertPlacement replicated = f.placement->layer(1);
  replicated.add_replica(0, 7);
  f.placement->set_layer(1, replicated);
  const StepResult& b = f.model->run(1, decode_batch(8, 8, 100), nullptr);
  EXPECT_EQ(b.num_slot_balance_layers, 3);
  const double mean = 2.0 / 17.0;
  EXPECT_NEAR(b.slot_imbalance_sum, 2 * 7.0 + (0.5 - mean) / mean, 1e-12);
  EXPECT_NEAR(b.slot_balancedness_sum, 2 * 0.125 + mean / 0.5, 1e-12);
}

// Durations beyond the horizon (sim/core/horizon.h, issue 19): refused, never rounded.
std::string horizon_error_of(Fixture& f, const std::vector<std::vector<SeqSlice>>& batch,
                             StepObserver* observer = nullptr) {
  try {
    f.model->run(0, batch, observer);
  } catch (const HorizonError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(StepModelHorizon, AGpuOfAlmostNoFlopsOrBandwidthIsAnOpError) {
  TopologySpec spec = testing::nvlink_node_spec("h200-sxm", 8, 360e9);
  spec.gpu.fp32_flops_per_s = spec.gpu.tf32_flops_per_s = spec.gpu.bf16_flops_per_s =
      spec.gpu.fp8_flops_per_s = spec.gpu.fp4_flops_per_s = 1e-300;
  spec.gpu.hbm_bytes_per_s = 1e-300;
  Fixture f(tiny(), spec, DeploymentSpec{});
  const std::string message = horizon_error_of(f, decode_batch(8, 4, 1000));
  EXPECT_EQ(message.rfind("cost model 'roofline': ", 0), 0u) << message;
  EXPECT_NE(message.find(" s, beyond the 100-year horizon (3.156e+09 s): check the peak FLOP/s "
                         "and HBM bandwidth of GPU 'h200-sxm' ([gpu] in the topology) and "
                         "[cost.roofline]"),
            std::string::npos)
      << message;
}

// Prices every op at a fixed duration.
class FixedCost final : public CostModel {
 public:
  explicit FixedCost(double seconds) : seconds_(seconds) {}
  std::string_view name() const override { return "fixed"; }
  double seconds(const OpWork& work) const override { return work.empty() ? 0 : seconds_; }
  std::string describe_inputs() const override { return "the test's constant"; }

 private:
  double seconds_;
};

TEST(StepModelHorizon, OpsWithinTheHorizonAddingUpPastItAreAStepError) {
  // Every op takes a fifth of the horizon: each passes its own check, the step (several ops per
  // layer, several layers) does not.
  const FixedCost cost(kHorizonS / 5);
  Fixture f(tiny(), testing::nvlink_node_spec("h200-sxm", 8, 360e9), DeploymentSpec{}, -1, &cost);
  CountingObserver obs;  // spans past the horizon are not reported; the step is refused
  const std::string message = horizon_error_of(f, decode_batch(8, 4, 1000), &obs);
  EXPECT_EQ(message.rfind("step model: a step of 32 tokens on 8 GPUs over ", 0), 0u) << message;
  EXPECT_NE(message.find(" s, beyond the 100-year horizon (3.156e+09 s): its slowest GPU computes "
                         "for "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("check the topology's bandwidths and the test's constant"),
            std::string::npos)
      << message;
  EXPECT_LE(obs.max_end_ns, kHorizonNs);
}

TEST(StepModelHorizon, AnOpPastTheHorizonNamesTheOp) {
  const FixedCost cost(1e300);
  Fixture f(tiny(), testing::nvlink_node_spec("h200-sxm", 8, 360e9), DeploymentSpec{}, -1, &cost);
  const std::string message = horizon_error_of(f, decode_batch(8, 4, 1000));
  EXPECT_NE(message.find("cost model 'fixed': "), std::string::npos) << message;
  EXPECT_NE(message.find(" takes 1e+300 s, beyond the 100-year horizon (3.156e+09 s): check the "
                         "test's constant"),
            std::string::npos)
      << message;
}

TEST(StepModelHorizon, ALinkOfAlmostNoBandwidthIsACollectiveErrorOnBothTiers) {
  for (bool fast : {false, true}) {
    Fixture f(tiny(), testing::nvlink_node_spec("h200-sxm", 8, 1e-300 * 1e9), DeploymentSpec{});
    f.rebuild(Fixture::tier(fast));
    ASSERT_EQ(f.model->fast_fidelity_refusal(), "");
    const std::string message = horizon_error_of(f, decode_batch(8, 4, 1000));
    SCOPED_TRACE(message);
    EXPECT_EQ(message.rfind("network: an all-to-all takes ", 0), 0u);
    // The fast fidelity has no per-link loads: it names the topology's slowest link.
    EXPECT_NE(message.find(fast ? "the topology's slowest link, nvlink gpu0->nvswitch0, runs at "
                                  "1e-291 bytes/s"
                                : "its bottleneck, link nvlink "),
              std::string::npos);
  }
}

// Every span of a step, for the overlap checks below.
struct Span {
  int32_t gpu;
  std::string name;
  int32_t layer_idx;
  SimTime start_ns, duration_ns;
};
class SpanRecorder final : public StepObserver {
 public:
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    spans.push_back({gpu_idx, name, layer_idx, start_ns, duration_ns});
  }
  // The first start of any span of `layer_idx` (-1: the output head).
  SimTime layer_start(int32_t layer_idx) const {
    SimTime t = kSimTimeMax;
    for (const Span& s : spans) {
      if (s.layer_idx == layer_idx) t = std::min(t, s.start_ns);
    }
    return t;
  }
  const Span* find(int32_t gpu, const std::string& name, int32_t layer_idx) const {
    for (const Span& s : spans) {
      if (s.gpu == gpu && s.name == name && s.layer_idx == layer_idx) return &s;
    }
    return nullptr;
  }
  std::vector<Span> spans;
};

// overlap = "simple" keeps the formula: every MoE layer ends max(C, D) + min(C, D) / 2 after its
// earliest GPU clock after the router, C the latest GPU's (clock - start + experts), D the
// overlapped span (tiny: layer 0 dense, layers 1-3 MoE; a hot GPU makes the clocks differ).
TEST(StepModelTest, SimpleOverlapIsTheFormula) {
  DeploymentSpec d;
  d.overlap = OverlapMode::kSimple;
  Fixture f(tiny(), 8, d, /*hot_gpu=*/0);
  SpanRecorder rec;
  f.model->run(0, decode_batch(8, 64, 700), &rec);
  for (int32_t l = 1; l <= 3; ++l) {
    const Span* ovl = rec.find(0, "dispatch+combine (overlapped)", l);
    ASSERT_NE(ovl, nullptr);
    const double start = to_seconds(ovl->start_ns);
    const double dur = to_seconds(ovl->duration_ns);
    double c = 0;
    for (int32_t g = 0; g < 8; ++g) {
      const Span* e = rec.find(g, "experts", l);
      ASSERT_NE(e, nullptr);
      c = std::max(c, to_seconds(e->start_ns + e->duration_ns) - start);
    }
    const double end = start + std::max(c, dur) + std::min(c, dur) / 2.0;
    const SimTime next = rec.layer_start(l == 3 ? -1 : l + 1);
    EXPECT_NEAR(static_cast<double>(next), 1e9 * end, 3.0) << "layer " << l;
  }
}

// The generic timeline with one micro-batch (sequential_schedule) reproduces the barrier path:
// each MoE layer's spans of a run without overlap, fed back as stage costs, end where the step
// model's next layer starts.
TEST(StepModelTest, NoOverlapIsTheSequentialTimeline) {
  Fixture f(tiny(), 8, DeploymentSpec{}, /*hot_gpu=*/0);
  SpanRecorder rec;
  f.model->run(0, decode_batch(8, 64, 700), &rec);
  for (int32_t l = 1; l <= 3; ++l) {
    LayerStageCosts c;
    c.reset(l, 8);
    std::vector<double> clock(8);
    for (int32_t g = 0; g < 8; ++g) {
      const Span* a = rec.find(g, "attention", l);
      ASSERT_NE(a, nullptr);
      clock[g] = to_seconds(a->start_ns);
      c.compute(0, StageOp::kAttention, g) = to_seconds(a->duration_ns);
      c.compute(0, StageOp::kRouter, g) = to_seconds(rec.find(g, "router", l)->duration_ns);
      c.compute(0, StageOp::kExperts, g) = to_seconds(rec.find(g, "experts", l)->duration_ns);
    }
    c.comm(0, StageOp::kDispatch) = to_seconds(rec.find(0, "dispatch", l)->duration_ns);
    c.comm(0, StageOp::kCombine) = to_seconds(rec.find(0, "combine", l)->duration_ns);
    TimelineTotals t{std::vector<double>(8, 0.0), std::vector<double>(8, 0.0),
                     std::vector<double>(8, 0.0)};
    run_microbatch_timeline(sequential_schedule(), std::vector<LayerStageCosts>{c}, SmSharing{},
                            clock, t, nullptr);
    const SimTime next = rec.layer_start(l == 3 ? -1 : l + 1);
    for (int32_t g = 0; g < 8; ++g) {
      EXPECT_NEAR(1e9 * clock[g], static_cast<double>(next), 8.0) << "layer " << l;
    }
  }
}

// The micro-batch schedules, whole steps: never faster than the busiest GPU's compute, never
// slower than compute plus communication (balanced routing: the GPUs are alike, so at any time
// one resource is busy), every stage traced per micro-batch, and in decode the expert and
// attention weights read once per micro-batch (compute grows over the run without overlap).
TEST(StepModelTest, MicrobatchSchedulesStayBetweenComputeAndTheSum) {
  std::vector<std::vector<SeqSlice>> prefill(8);
  for (auto& r : prefill) r = {SeqSlice{700, 0, true}, SeqSlice{333, 100, true}};
  for (OverlapMode mode : {OverlapMode::kTwoMicrobatch, OverlapMode::kDecodePipeline}) {
    DeploymentSpec d;
    d.overlap = mode;
    Fixture none(tiny(), 8, DeploymentSpec{});
    Fixture ovl(tiny(), 8, d);
    const std::vector<std::vector<std::vector<SeqSlice>>> batches = {
        decode_batch(8, 64, 700), decode_batch(8, 7, 3000), prefill};
    for (size_t i = 0; i < batches.size(); ++i) {
      const auto& batch = batches[i];
      SpanRecorder rec;
      const StepResult r = ovl.model->run(0, batch, &rec);
      const StepResult base = none.model->run(0, batch, nullptr);
      SimTime max_compute = 0;
      for (int32_t g = 0; g < 8; ++g) max_compute = std::max(max_compute, r.compute_ns[g]);
      EXPECT_GE(r.duration_ns + 2, max_compute) << overlap_mode_name(mode);
      EXPECT_LE(static_cast<double>(r.duration_ns),
                1.02 * static_cast<double>(max_compute + r.comm_ns[0]))
          << overlap_mode_name(mode);
      // Decode (memory-bound): weights read twice.
      if (i < 2) {
        EXPECT_GT(r.compute_ns[0], base.compute_ns[0]) << overlap_mode_name(mode);
      }
      EXPECT_EQ(r.dispatch_bytes > 0, base.dispatch_bytes > 0);
      for (const char* name :
           {"attention/mb0", "attention/mb1", "router/mb1", "dispatch/mb0", "dispatch/mb1",
            "experts/mb1", "shared_experts/mb0", "combine/mb1"}) {
        EXPECT_NE(rec.find(3, name, 2), nullptr) << name << " " << overlap_mode_name(mode);
      }
      EXPECT_EQ(rec.find(3, "attention_prep/mb1", 2) != nullptr,
                mode == OverlapMode::kDecodePipeline);
      EXPECT_EQ(rec.find(3, "dispatch", 2), nullptr);
      // The dense layer 0 and the output head run as without overlap.
      EXPECT_NE(rec.find(3, "dense_ffn", 0), nullptr);
      EXPECT_NE(rec.find(3, "lm_head", -1), nullptr);
    }
  }
}

// The split: a rank's prefill chunk of 701 tokens is cut at 351 (ceil(701 / 2)); micro-batch 0's
// attention is that of a 351-token chunk, micro-batch 1's that of the other 350 tokens over the
// first 351 as context (each checked against a step without overlap of that one slice).
TEST(StepModelTest, TwoMicrobatchCutsAPrefillChunk) {
  DeploymentSpec d;
  d.overlap = OverlapMode::kTwoMicrobatch;
  Fixture f(tiny(), 8, d);
  Fixture none(tiny(), 8, DeploymentSpec{});
  auto attention_ns = [&](Fixture& fx, const SeqSlice& slice, const char* name) {
    SpanRecorder rec;
    fx.model->run(0, std::vector<std::vector<SeqSlice>>(8, {slice}), &rec);
    const Span* a = rec.find(0, name, 2);  // layer 2: MLA
    return a ? a->duration_ns : SimTime{-1};
  };
  SpanRecorder rec;
  f.model->run(0, std::vector<std::vector<SeqSlice>>(8, {SeqSlice{701, 0, true}}), &rec);
  ASSERT_NE(rec.find(0, "attention/mb0", 2), nullptr);
  ASSERT_NE(rec.find(0, "attention/mb1", 2), nullptr);
  EXPECT_NEAR(static_cast<double>(rec.find(0, "attention/mb0", 2)->duration_ns),
              static_cast<double>(attention_ns(none, SeqSlice{351, 0, true}, "attention")), 1.0);
  EXPECT_NEAR(static_cast<double>(rec.find(0, "attention/mb1", 2)->duration_ns),
              static_cast<double>(attention_ns(none, SeqSlice{350, 351, true}, "attention")), 1.0);
}

// Both fidelities call the same timeline: the fast fidelity's micro-batch step is close to the
// exact one.
TEST(StepModelTest, MicrobatchSchedulesAgreeAcrossTiers) {
  for (OverlapMode mode : {OverlapMode::kTwoMicrobatch, OverlapMode::kDecodePipeline}) {
    DeploymentSpec d;
    d.overlap = mode;
    Fixture exact(tiny(), 8, d);
    Fixture fast(tiny(), 8, d);
    fast.rebuild(Fixture::tier(true));
    const auto batch = decode_batch(8, 64, 700);
    const StepResult a = exact.model->run(0, batch, nullptr);
    const StepResult b = fast.model->run(0, batch, nullptr);
    EXPECT_GT(b.num_fast_layers, 0);
    EXPECT_NEAR(static_cast<double>(b.duration_ns), static_cast<double>(a.duration_ns),
                0.1 * static_cast<double>(a.duration_ns))
        << overlap_mode_name(mode);
  }
}

}  // namespace
}  // namespace moesim::sim
