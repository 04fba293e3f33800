#include "sim/placement/expert_placement.h"

#include <gtest/gtest.h>

#include "sim/config/toml_source.h"
#include "sim/core/rng.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

TEST(ExpertPlacement, ContiguousAndStridedLayouts) {
  const ExpertPlacement c = ExpertPlacement::contiguous(16, 4, 2, 1, "t");
  EXPECT_EQ(c.replicas(5)[0], 1);
  EXPECT_EQ(std::vector<int32_t>(c.experts_on(3).begin(), c.experts_on(3).end()),
            (std::vector<int32_t>{12, 13, 14, 15}));
  EXPECT_EQ(c.num_shared_experts(), 1);
  EXPECT_EQ(c.max_slots_per_gpu(), 4);
  EXPECT_FALSE(c.has_replicas());
  const ExpertPlacement s = ExpertPlacement::strided(16, 4, 2, 0, "t");
  EXPECT_EQ(s.replicas(5)[0], 1);
  EXPECT_EQ(std::vector<int32_t>(s.experts_on(3).begin(), s.experts_on(3).end()),
            (std::vector<int32_t>{3, 7, 11, 15}));
  EXPECT_EQ(s.node_of(3), 1);
}

TEST(ExpertPlacement, ImpossibleLayoutsAreConfigErrors) {
  EXPECT_EQ(config_error_of([] { ExpertPlacement::contiguous(10, 4, 2, 0, "s.toml"); }),
            "s.toml: layout: the 10 experts do not divide evenly over 4 GPUs");
  EXPECT_NE(config_error_of([] {
              ExpertPlacement::contiguous(16, 4, 3, 0, "s.toml");
            }).find("gpus_per_node: must be >= 1 and divide"),
            std::string::npos);
  EXPECT_NE(config_error_of([] {
              ExpertPlacement(2, 2, 1, 0, {{0}, {}}, "s.toml");
            }).find("replicas[1]: expert 1 has no GPU"),
            std::string::npos);
  EXPECT_NE(config_error_of([] {
              ExpertPlacement(2, 2, 1, 0, {{0, 0}, {1}}, "s.toml");
            }).find("listed twice"),
            std::string::npos);
}

// 8 GPUs, 4 per node; expert e on GPU e (8 experts); replicas added per test.
ExpertPlacement eight() { return ExpertPlacement::contiguous(8, 8, 4, 0, "t"); }

// A source hosting a replica shares its selections with the other replicas on its node (the
// split EPLB sizes replicas for), and keeps them when it is the node's only one.
TEST(ReplicaDispatcher, SourcesShareTheirNodesReplicas) {
  ExpertPlacement p = eight();
  p.add_replica(0, 1);  // expert 0 on GPUs 0 and 1 (node 0)
  p.add_replica(0, 5);  // and on GPU 5 (node 1)
  CountMatrix se(8, 8), sd;
  se.at(1, 0) = 6;  // source 1 hosts a replica of expert 0
  se.at(5, 0) = 7;  // source 5 hosts node 1's only one
  ReplicaDispatcher d;
  d.dispatch(p, se, sd);
  EXPECT_EQ(sd.at(1, 0), 3);
  EXPECT_EQ(sd.at(1, 1), 3);
  EXPECT_EQ(sd.at(5, 5), 7);
  EXPECT_EQ(sd.at(5, 0), 0);
}

TEST(ReplicaDispatcher, SameNodeBeforeRemote) {
  ExpertPlacement p = eight();
  p.add_replica(0, 6);  // expert 0 on GPU 0 (node 0) and GPU 6 (node 1)
  CountMatrix se(8, 8), sd;
  se.at(4, 0) = 9;  // source 4 is on node 1: GPU 6
  se.at(1, 0) = 3;  // source 1 is on node 0: GPU 0
  ReplicaDispatcher d;
  d.dispatch(p, se, sd);
  EXPECT_EQ(sd.at(4, 6), 9);
  EXPECT_EQ(sd.at(1, 0), 3);
}

TEST(ReplicaDispatcher, LeastLoadedWithTiesToLowestGpu) {
  ExpertPlacement p = ExpertPlacement::contiguous(8, 8, 2, 0, "t");  // nodes of 2
  p.add_replica(7, 2);  // expert 7 on GPUs 2 and 7; source 0 (node 0) has neither local
  CountMatrix se(8, 8), sd;
  se.at(0, 2) = 4;  // GPU 2 already received 4 when expert 7 is dispatched
  se.at(0, 7) = 7;
  ReplicaDispatcher d;
  d.dispatch(p, se, sd);
  // Per-selection greedy: GPU 7 (load 0) takes 4 to tie at 4, then 3 left alternate 2,7,2.
  EXPECT_EQ(sd.at(0, 2), 4 + 2);
  EXPECT_EQ(sd.at(0, 7), 5);
  const auto slots = d.slot_loads();
  EXPECT_EQ(slots[d.slot_offset(7)], 2);      // replica on GPU 2
  EXPECT_EQ(slots[d.slot_offset(7) + 1], 5);  // replica on GPU 7
}

// The water-filling dispatcher against one-selection-at-a-time greedy, on random layouts.
TEST(ReplicaDispatcher, MatchesPerSelectionGreedyAndConservesSelections) {
  RngStream rng(5, "placement");
  for (int trial = 0; trial < 50; ++trial) {
    ExpertPlacement p = ExpertPlacement::strided(32, 8, 4, 1, "t");
    for (int r = 0; r < 12; ++r) {
      const auto e = static_cast<int32_t>(rng.uniform_int(32));
      const auto g = static_cast<int32_t>(rng.uniform_int(8));
      const auto gpus = p.replicas(e);
      if (std::find(gpus.begin(), gpus.end(), g) == gpus.end()) p.add_replica(e, g);
    }
    CountMatrix se(8, 32), sd;
    for (int s = 0; s < 8; ++s)
      for (int e = 0; e < 32; ++e) se.at(s, e) = static_cast<int32_t>(rng.uniform_int(20));
    ReplicaDispatcher d;
    d.dispatch(p, se, sd);
    // Reference.
    std::vector<int64_t> load(8, 0);
    CountMatrix ref(8, 8);
    for (int s = 0; s < 8; ++s) {
      for (int e = 0; e < 32; ++e) {
        const auto gpus = p.replicas(e);
        for (int unit = 0; unit < se.at(s, e); ++unit) {
          int32_t dst = -1;
          {
            std::vector<int32_t> cands;
            for (int32_t g : gpus) {
              if (p.node_of(g) == p.node_of(s)) cands.push_back(g);
            }
            if (cands.empty()) cands.assign(gpus.begin(), gpus.end());
            for (int32_t g : cands) {
              if (dst < 0 || load[g] < load[dst]) dst = g;  // ascending ids: ties keep lowest
            }
          }
          ++load[dst];
          ++ref.at(s, dst);
        }
      }
    }
    ASSERT_EQ(sd, ref) << "trial " << trial;
    EXPECT_EQ(sd.total(), se.total());
    int64_t slot_total = 0;
    for (int64_t v : d.slot_loads()) slot_total += v;
    EXPECT_EQ(slot_total, se.total());
  }
}

// The fast fidelity's dispatch of layer totals with one group per source is dispatch() on the
// selections the groups' floor rule gives each source: the same destinations, slot loads, and
// the part of each destination's selections from its own node.
TEST(ReplicaDispatcher, TotalsWithOneGroupPerSourceAreTheDispatchOfTheirSplit) {
  ExpertPlacement p = eight();
  p.add_replica(0, 1);
  p.add_replica(0, 5);
  p.add_replica(3, 6);
  p.add_replica(6, 2);
  const std::vector<int64_t> totals = {40, 3, 0, 25, 7, 11, 30, 1};
  const std::vector<int64_t> tokens = {5, 0, 9, 3, 12, 1, 4, 6};
  std::vector<int32_t> nodes;
  for (int32_t s = 0; s < 8; ++s) nodes.push_back(p.node_of(s));
  int64_t all = 0;
  for (int64_t t : tokens) all += t;
  CountMatrix se(8, 8), sd;
  int64_t cum = 0;
  for (int32_t s = 0; s < 8; ++s) {
    for (int32_t e = 0; e < 8; ++e) {
      se.at(s, e) =
          static_cast<int32_t>(totals[e] * (cum + tokens[s]) / all - totals[e] * cum / all);
    }
    cum += tokens[s];
  }
  ReplicaDispatcher exact, fast;
  exact.dispatch(p, se, sd);
  std::vector<int64_t> dst, local;
  fast.dispatch_totals(p, totals, tokens, nodes, dst, local);
  std::vector<int64_t> want(8);
  sd.col_sums(want);
  EXPECT_EQ(dst, want);
  EXPECT_EQ(std::vector<int64_t>(fast.slot_loads().begin(), fast.slot_loads().end()),
            std::vector<int64_t>(exact.slot_loads().begin(), exact.slot_loads().end()));
  for (int32_t d = 0; d < 8; ++d) {
    int64_t from_node = 0;
    for (int32_t s = 0; s < 8; ++s) {
      if (p.node_of(s) == p.node_of(d)) from_node += sd.at(s, d);
    }
    EXPECT_EQ(local[d], from_node) << "GPU " << d;
  }
}

}  // namespace
}  // namespace moesim::sim
