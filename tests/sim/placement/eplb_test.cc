#include "sim/placement/eplb.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "sim/config/toml_source.h"
#include "sim/core/rng.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

// The README example of DeepSeek's EPLB: 2 layers x 12 experts, 16 slots, 4 groups, 2 nodes,
// 8 GPUs.
const std::vector<std::vector<double>> kReadmeLoads = {
    {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
    {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};

EplbShape readme_shape() {
  EplbShape s;
  s.num_experts = 12;
  s.num_physical_slots = 16;
  s.num_groups = 4;
  s.num_nodes = 2;
  s.num_gpus = 8;
  return s;
}

// Per node: the sorted per-GPU loads; the two nodes sorted by their first entry.
std::vector<std::vector<double>> node_multisets(const EplbLayout& layout, int32_t gpus_per_node) {
  std::vector<std::vector<double>> nodes;
  for (size_t g = 0; g < layout.gpu_loads.size(); g += gpus_per_node) {
    std::vector<double> v(layout.gpu_loads.begin() + static_cast<int64_t>(g),
                          layout.gpu_loads.begin() + static_cast<int64_t>(g) + gpus_per_node);
    std::sort(v.begin(), v.end());
    nodes.push_back(v);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

TEST(Eplb, ReadmeExampleGolden) {
  const EplbShape shape = readme_shape();
  ASSERT_TRUE(eplb_is_hierarchical(shape));
  const EplbLayout l0 = balance_experts(kReadmeLoads[0], shape);
  const EplbLayout l1 = balance_experts(kReadmeLoads[1], shape);
  EXPECT_EQ(node_multisets(l0, 4), (std::vector<std::vector<double>>{
                                       {86.5, 113.0, 121.5, 125.0}, {131.5, 147.5, 152.0, 156.0}}));
  EXPECT_EQ(node_multisets(l1, 4),
            (std::vector<std::vector<double>>{{117.5, 118.5, 123.0, 152.0},
                                              {120.5, 172.0, 173.0, 179.5}}));
  // Replica counts: the four redundant slots go to the heaviest experts per replica.
  EXPECT_EQ(l0.replica_count, (std::vector<int32_t>{1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1}));
  EXPECT_EQ(l1.replica_count, (std::vector<int32_t>{1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1}));
}

// Invariants of any layout: every slot assigned, replica counts match the slots, two slots per
// GPU, no GPU hosts an expert twice, loads conserved.
void expect_valid(const EplbLayout& l, std::span<const double> loads, const EplbShape& s) {
  const int32_t per_gpu = s.num_physical_slots / s.num_gpus;
  std::vector<int32_t> count(s.num_experts, 0);
  for (int32_t e : l.physical_to_logical) {
    ASSERT_GE(e, 0);
    ++count[e];
  }
  EXPECT_EQ(count, l.replica_count);
  for (int32_t g = 0; g < s.num_gpus; ++g) {
    std::vector<int32_t> here(l.physical_to_logical.begin() + g * per_gpu,
                              l.physical_to_logical.begin() + (g + 1) * per_gpu);
    std::sort(here.begin(), here.end());
    EXPECT_EQ(std::adjacent_find(here.begin(), here.end()), here.end()) << "GPU " << g;
  }
  for (int32_t e = 0; e < s.num_experts; ++e) {
    EXPECT_EQ(static_cast<int32_t>(l.replicas_of_expert[e].size()), l.replica_count[e]);
  }
  const double total = std::accumulate(loads.begin(), loads.end(), 0.0);
  const double placed = std::accumulate(l.gpu_loads.begin(), l.gpu_loads.end(), 0.0);
  EXPECT_NEAR(placed, total, 1e-9 * std::max(1.0, total));
}

TEST(Eplb, HierarchicalKeepsGroupsOnOneNode) {
  const EplbShape shape = readme_shape();
  for (const auto& loads : kReadmeLoads) {
    const EplbLayout l = balance_experts(loads, shape);
    expect_valid(l, loads, shape);
    for (int32_t g = 0; g < 4; ++g) {  // group g: experts 3g..3g+2
      const int32_t node = l.replicas_of_expert[3 * g][0] / 4;
      for (int32_t j = 0; j < 3; ++j) {
        for (int32_t gpu : l.replicas_of_expert[3 * g + j]) EXPECT_EQ(gpu / 4, node);
      }
    }
  }
}

TEST(Eplb, GlobalVariantWhenGroupsDoNotDivideNodes) {
  EplbShape shape = readme_shape();
  shape.num_groups = 3;  // 3 groups over 2 nodes: global
  EXPECT_FALSE(eplb_is_hierarchical(shape));
  const EplbLayout l = balance_experts(kReadmeLoads[0], shape);
  expect_valid(l, kReadmeLoads[0], shape);
  // Global balancing: the max GPU load is no worse than the hierarchical layout's.
  const EplbLayout h = balance_experts(kReadmeLoads[0], readme_shape());
  EXPECT_LE(*std::max_element(l.gpu_loads.begin(), l.gpu_loads.end()),
            *std::max_element(h.gpu_loads.begin(), h.gpu_loads.end()));
}

TEST(Eplb, SkewedRandomLoadsStayValidAndBalanced) {
  RngStream rng(7, "eplb.test");
  EplbShape shape;
  shape.num_experts = 64;
  shape.num_physical_slots = 80;
  shape.num_groups = 8;
  shape.num_nodes = 2;
  shape.num_gpus = 16;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> loads(64);
    for (double& w : loads) {
      const double u = rng.uniform01_open();
      w = std::floor(1000.0 * u * u * u * u);  // heavy skew, many ties at 0
    }
    const EplbLayout l = balance_experts(loads, shape);
    expect_valid(l, loads, shape);
    const double mean = std::accumulate(loads.begin(), loads.end(), 0.0) / 16.0;
    const double max_load = *std::max_element(l.gpu_loads.begin(), l.gpu_loads.end());
    const double max_expert = *std::max_element(loads.begin(), loads.end());
    // Within the greedy bound: mean plus the heaviest single replica (at most the hottest expert).
    EXPECT_LE(max_load, 2.0 * mean + max_expert);
  }
}

TEST(Eplb, NeverTwoReplicasOfAnExpertOnOneGpu) {
  // One dominant expert takes every redundant slot up to the cap (4 GPUs per node).
  EplbShape shape;
  shape.num_experts = 8;
  shape.num_physical_slots = 16;
  shape.num_groups = 2;
  shape.num_nodes = 2;
  shape.num_gpus = 8;
  const std::vector<double> loads = {1000, 1, 1, 1, 1, 1, 1, 1};
  const EplbLayout l = balance_experts(loads, shape);
  expect_valid(l, loads, shape);
  EXPECT_EQ(l.replica_count[0], 4);
  const ExpertPlacement p = ExpertPlacement(8, 8, 4, 0, l.replicas_of_expert, "t");
  EXPECT_EQ(p.total_slots(), 16);
  EXPECT_EQ(p.max_slots_per_gpu(), 2);
}

TEST(Eplb, DeterministicAndPlacementsPerLayer) {
  const auto a = balance_placements(kReadmeLoads, readme_shape(), 4, 1);
  const auto b = balance_placements(kReadmeLoads, readme_shape(), 4, 1);
  ASSERT_EQ(a.size(), 2u);
  for (size_t l = 0; l < a.size(); ++l) {
    EXPECT_EQ(a[l].total_slots(), 16);
    EXPECT_EQ(a[l].max_slots_per_gpu(), 2);
    EXPECT_EQ(a[l].num_shared_experts(), 1);
    for (int32_t e = 0; e < 12; ++e) {
      EXPECT_TRUE(std::ranges::equal(a[l].replicas(e), b[l].replicas(e)));
    }
  }
}

TEST(Eplb, ShapeErrors) {
  EplbShape s = readme_shape();
  s.num_physical_slots = 15;
  EXPECT_NE(config_error_of([&] { validate_eplb_shape(s, "x"); }).find("multiple of the 8 GPUs"),
            std::string::npos);
  s = readme_shape();
  s.num_physical_slots = 64;  // 32 slots per node for 6 experts on 4 GPUs: more than 4 each
  EXPECT_NE(config_error_of([&] { validate_eplb_shape(s, "x"); }).find("more replicas"),
            std::string::npos);
  s = readme_shape();
  s.num_groups = 5;
  EXPECT_NE(config_error_of([&] { validate_eplb_shape(s, "x"); }).find("num_groups"),
            std::string::npos);
}

TEST(ExpertLoadAverage, ExponentialAndWindow) {
  ExpertLoadAverage ema(1, 2, LoadAverageKind::kExponential, 0.5, 1);
  ema.add(0, std::vector<double>{4, 0});
  EXPECT_EQ(ema.average(0), (std::vector<double>{4, 0}));
  ema.add(0, std::vector<double>{0, 8});
  EXPECT_EQ(ema.average(0), (std::vector<double>{2, 4}));
  ExpertLoadAverage win(2, 2, LoadAverageKind::kWindow, 0.1, 2);
  EXPECT_EQ(win.average(1), (std::vector<double>{0, 0}));
  win.add(1, std::vector<double>{2, 2});
  win.add(1, std::vector<double>{4, 0});
  EXPECT_EQ(win.average(1), (std::vector<double>{3, 1}));
  win.add(1, std::vector<double>{6, 6});  // drops the first sample
  EXPECT_EQ(win.average(1), (std::vector<double>{5, 3}));
  EXPECT_EQ(win.num_samples(1), 3);
  EXPECT_EQ(win.num_samples(0), 0);
}

TEST(EplbConfig, ParsesDefaultsAndRejectsBadValues) {
  {
    TomlDocument doc = TomlDocument::parse_string("", "p.toml");
    TomlTable t = doc.root();
    const EplbConfig c = parse_eplb_config(t, 16, 4, 2, 8);  // 16 + 8 slots
    EXPECT_EQ(c.redundant_slots, 8);
    EXPECT_EQ(c.variant, EplbConfig::Variant::kAuto);
    EXPECT_EQ(c.average, LoadAverageKind::kExponential);
    EXPECT_DOUBLE_EQ(c.ema_alpha, 0.1);
    EXPECT_DOUBLE_EQ(c.period_s, 60.0);
  }
  auto parse = [](const std::string& text, int32_t groups) {
    return config_error_of([&] {
      TomlDocument doc = TomlDocument::parse_string(text, "p.toml");
      TomlTable t = doc.root();
      parse_eplb_config(t, 12, groups, 2, 8);
    });
  };
  EXPECT_EQ(parse("redundant_slots = 4\naverage = \"window\"\nwindow_samples = 3\n", 4), "");
  EXPECT_NE(parse("redundant_slots = 3\n", 4).find("redundant_slots"), std::string::npos);
  // 12 experts on 8 GPUs: the slots are a multiple of 8 and at least 12; the refusal names the
  // valid counts on either side (only the higher one below the fewest valid slots, 16).
  EXPECT_NE(parse("redundant_slots = 3\n", 4)
                .find("15 slots: must be at least the experts and a multiple of the 8 GPUs; the "
                      "nearest valid: 4 redundant slots (16 slots)"),
            std::string::npos);
  EXPECT_NE(parse("redundant_slots = 9\n", 4)
                .find("21 slots: must be at least the experts and a multiple of the 8 GPUs; the "
                      "nearest valid: 4 redundant slots (16 slots) or 12 (24 slots)"),
            std::string::npos);
  EXPECT_NE(parse("variant = \"hierarchical\"\n", 3).find("divide evenly"), std::string::npos);
  EXPECT_NE(parse("ema_alpha = 0\n", 4).find("ema_alpha"), std::string::npos);
  EXPECT_NE(parse("period_s = 0\n", 4).find("period_s"), std::string::npos);
  EXPECT_NE(parse("redundant_slots = 4\nbogus = 1\n", 4).find("unknown key"), std::string::npos);
}

TEST(EplbBalancer, RebalancesFromAveragedLoads) {
  EplbConfig c;
  c.redundant_slots = 4;
  c.average = LoadAverageKind::kWindow;
  c.window_samples = 4;
  EplbBalancer b(c, 2, 12, 4, 8, 4, 0);
  for (int i = 0; i < 3; ++i) {
    b.observe(0, kReadmeLoads[0]);
    b.observe(1, kReadmeLoads[1]);
  }
  const std::vector<ExpertPlacement> p = b.rebalance();
  ASSERT_EQ(p.size(), 2u);
  const EplbLayout l0 = balance_experts(kReadmeLoads[0], readme_shape());
  for (int32_t e = 0; e < 12; ++e) {
    EXPECT_TRUE(std::ranges::equal(p[0].replicas(e), l0.replicas_of_expert[e]));
  }
}

}  // namespace
}  // namespace moesim::sim
