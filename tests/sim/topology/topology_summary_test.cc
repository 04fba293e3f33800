#include "sim/topology/topology_summary.h"

#include <gtest/gtest.h>

#include "sim/topology/topology_parser.h"

namespace moesim::sim {
namespace {

const std::string kTopologies = std::string(MOESIM_SOURCE_DIR) + "/topologies/";

TEST(TopologySummary, DescribesH800EightByEight) {
  TopologySummary s = describe_topology(load_topology(kTopologies + "h800-8x8.toml"));
  EXPECT_EQ(s.name, "h800-8x8");
  EXPECT_EQ(s.num_gpus, 64);
  EXPECT_EQ(s.num_nvswitches, 8);
  EXPECT_EQ(s.num_leaves, 8);
  EXPECT_EQ(s.num_spines, 8);
  EXPECT_TRUE(s.rail_optimized);
  ASSERT_EQ(s.link_classes.size(), 3u);
  EXPECT_EQ(s.link_classes[1].link_class, LinkClass::kNic);
  EXPECT_EQ(s.link_classes[1].num_links, 128);
  EXPECT_DOUBLE_EQ(s.link_classes[1].max_capacity_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(s.bisection_bytes_per_s, 1.6e12);
  EXPECT_EQ(s.min_route_latency_ns, 800);
  EXPECT_EQ(s.max_route_latency_ns, 2850);
  EXPECT_EQ(summary_text(s),
            "topology h800-8x8: 64 GPUs = 8 nodes x 8 GPUs; 8 NVLink domains of 8 GPUs\n"
            "  8 nodes x 8 H800 SXM5, NVLink 200 GB/s line rate, 400 Gb/s per GPU, "
            "rail-optimised\n"
            "gpu h800-sxm: peak dense fp32 67 TFLOP/s, tf32 494.7 TFLOP/s, bf16 989.4 TFLOP/s, "
            "fp8 1978.9 TFLOP/s, fp4 -; HBM 80 GB at 3350 GB/s; 132 SMs; no price\n"
            "switches: 8 nvswitch, 8 leaf, 8 spine (rail-optimised)\n"
            "links (directed, one per direction):\n"
            "  nvlink        128  160 GB/s               300 ns\n"
            "  nic           128  50 GB/s                1000 ns\n"
            "  leaf_spine    128  50 GB/s                50 ns\n"
            "per GPU, one direction: NVLink 160 GB/s (line rate 200 GB/s), network 50 GB/s\n"
            "bisection, one direction: 1600 GB/s\n"
            "route latency: 800 ns .. 2850 ns\n");
}

TEST(TopologySummary, JsonCarriesUnitsInKeys) {
  nlohmann::json j =
      summary_json(describe_topology(load_topology(kTopologies + "h200-single.toml")));
  EXPECT_EQ(j["num_gpus"], 1);
  EXPECT_EQ(j["gpu"]["name"], "h200-sxm");
  EXPECT_DOUBLE_EQ(j["gpu"]["bf16_flops_per_s"].get<double>(), 989.4e12);
  EXPECT_DOUBLE_EQ(j["gpu"]["fp4_flops_per_s"].get<double>(), 0);
  EXPECT_EQ(j["gpu"]["hbm_bytes"], 141'000'000'000);
  EXPECT_TRUE(j["links"].empty());
  EXPECT_EQ(j["bisection_bytes_per_s"], 0.0);
  nlohmann::json k = summary_json(describe_topology(load_topology(kTopologies + "h800-8x8.toml")));
  EXPECT_EQ(k["links"][2]["class"], "leaf_spine");
  EXPECT_DOUBLE_EQ(k["links"][2]["min_capacity_bytes_per_s"].get<double>(), 50e9);
  EXPECT_EQ(k["links"][0]["min_latency_ns"], 300);
  EXPECT_DOUBLE_EQ(k["nic_bytes_per_s_per_gpu"].get<double>(), 50e9);
}

}  // namespace
}  // namespace moesim::sim
