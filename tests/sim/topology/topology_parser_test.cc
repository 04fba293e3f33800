#include "sim/topology/topology_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

const std::string kSourceDir = MOESIM_SOURCE_DIR;

std::map<LinkClass, int> count_by_class(const Topology& t) {
  std::map<LinkClass, int> n;
  for (const Link& l : t.links()) ++n[l.link_class];
  return n;
}

struct Shipped {
  const char* file;
  const char* gpu;
  int32_t num_gpus;
  int32_t num_nodes;
  int32_t nvlink_domain_gpus;
  int num_nvlink_links;
  int num_nic_links;
  int num_leaf_spine_links;
  double nvlink_bytes_per_s_per_gpu;
  double nic_bytes_per_s_per_gpu;
  double price_usd_per_hour;  // 0: no price (docs/topologies.md, "GPU prices")
};

TEST(TopologyParser, EveryShippedTopologyLoadsWithExpectedShape) {
  const Shipped shipped[] = {
      // 64 GPU-NVSwitch pairs, 64 GPU-leaf pairs, 8 leaves x 8 spines; two directions each.
      {"h800-8x8", "h800-sxm", 64, 8, 8, 128, 128, 128, 160e9, 50e9, 0},
      // 32 leaves x 16 spines.
      {"h800-128x8", "h800-sxm", 1024, 128, 8, 2048, 2048, 1024, 160e9, 50e9, 0},
      // h800-8x8's cluster with H100 / H200 GPUs: NVLink 450 GB/s line rate x 0.8.
      {"h100-8x8", "h100-sxm", 64, 8, 8, 128, 128, 128, 360e9, 50e9, 6.155},
      {"h200-8x8", "h200-sxm", 64, 8, 8, 128, 128, 128, 360e9, 50e9, 6.305},
      {"h100-node", "h100-sxm", 8, 1, 8, 16, 0, 0, 360e9, 0, 6.155},
      {"h200-node", "h200-sxm", 8, 1, 8, 16, 0, 0, 360e9, 0, 6.305},
      {"h200-single", "h200-sxm", 1, 1, 1, 0, 0, 0, 0, 0, 6.305},
      {"gb200-nvl72", "gb200", 72, 18, 72, 144, 0, 0, 720e9, 0, 10.5},
      // 28 GPU pairs, two directions.
      {"mi355x-node", "mi355x", 8, 1, 8, 56, 0, 0, 537.6e9 * 0.8, 0, 0},
      // Calibration loop: 2 GPUs on one NVSwitch, two directions.
      {"cpu-2", "h200-sxm", 2, 1, 2, 4, 0, 0, 360e9, 0, 0},
  };
  std::set<std::string> files_on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(kSourceDir + "/topologies")) {
    if (entry.path().extension() == ".toml") files_on_disk.insert(entry.path().stem().string());
  }
  EXPECT_EQ(files_on_disk.size(), std::size(shipped)) << "a shipped topology lacks a test row";
  for (const Shipped& s : shipped) {
    SCOPED_TRACE(s.file);
    Topology t = load_topology(kSourceDir + "/topologies/" + s.file + ".toml");
    EXPECT_EQ(t.name(), s.file);
    EXPECT_FALSE(t.spec().description.empty());
    GpuSpec hardware = t.gpu_spec();
    EXPECT_EQ(hardware.price_usd_per_hour.value_or(0), s.price_usd_per_hour);
    // A price is quoted with its source: a URL and the date read.
    EXPECT_EQ(hardware.price_source.find("https://") != std::string::npos,
              hardware.price_usd_per_hour.has_value());
    hardware.price_usd_per_hour.reset();
    hardware.price_source.clear();
    EXPECT_EQ(hardware, *find_gpu_spec(s.gpu));
    EXPECT_EQ(t.num_gpus(), s.num_gpus);
    EXPECT_EQ(t.num_nodes(), s.num_nodes);
    EXPECT_EQ(t.nvlink_domain_gpus(), s.nvlink_domain_gpus);
    auto n = count_by_class(t);
    EXPECT_EQ(n[LinkClass::kNvlink], s.num_nvlink_links);
    EXPECT_EQ(n[LinkClass::kNic], s.num_nic_links);
    EXPECT_EQ(n[LinkClass::kLeafSpine], s.num_leaf_spine_links);
    EXPECT_DOUBLE_EQ(t.nvlink_bytes_per_s_per_gpu(), s.nvlink_bytes_per_s_per_gpu);
    EXPECT_DOUBLE_EQ(t.nic_bytes_per_s_per_gpu(), s.nic_bytes_per_s_per_gpu);
  }
}

TEST(TopologyParser, ConvertsUnitsAndAppliesGpuOverrides) {
  auto doc = TomlDocument::parse_string(R"(
[gpu]
model = "h200-sxm"
name = "h200-capped"
bf16_tflops = 700
num_sms = 114
price_usd_per_hour = 3.2
price_source = "a quote"
[node]
gpus_per_node = 2
nvlink_gbytes_per_s = 100
nvlink_latency_ns = 10
nvswitch_latency_ns = 5
[network]
num_nodes = 2
nics_per_gpu = 2
nic_gbps = 200
nic_latency_ns = 100
rail_optimized = false
leaf_gpus = 2
num_spines = 1
oversubscription = 2
leaf_spine_latency_ns = 7
switch_latency_ns = 3
)",
                                        "t.toml");
  TomlTable root = doc.root();
  TopologySpec spec = parse_topology_spec(root, "t");
  EXPECT_EQ(spec.gpu.name, "h200-capped");
  EXPECT_DOUBLE_EQ(spec.gpu.bf16_flops_per_s, 700e12);
  EXPECT_DOUBLE_EQ(spec.gpu.fp8_flops_per_s, 1978.9e12);  // catalogue value kept
  EXPECT_EQ(spec.gpu.hbm_bytes, 141'000'000'000);
  EXPECT_EQ(spec.gpu.num_sms, 114);
  EXPECT_EQ(spec.gpu.price_usd_per_hour, 3.2);  // not a hardware figure: only when given
  EXPECT_EQ(spec.gpu.price_source, "a quote");
  EXPECT_DOUBLE_EQ(spec.nvlink_bytes_per_s, 100e9);
  EXPECT_DOUBLE_EQ(spec.nic_bytes_per_s, 25e9);  // 200 Gb/s
  EXPECT_EQ(spec.nics_per_gpu, 2);
  EXPECT_FALSE(spec.rail_optimized);
  EXPECT_DOUBLE_EQ(spec.oversubscription, 2.0);
  EXPECT_EQ(spec.leaf_spine_latency_ns, 7);
  Topology t(spec);
  EXPECT_DOUBLE_EQ(t.nic_bytes_per_s_per_gpu(), 50e9);
  // Leaf 0 holds node 0's two GPUs: 2 x 50 GB/s / oversubscription 2 / 1 spine.
  for (const Link& l : t.links()) {
    if (l.link_class == LinkClass::kLeafSpine) {
      EXPECT_DOUBLE_EQ(l.capacity_bytes_per_s, 50e9);
    }
  }
}

TEST(TopologyParser, CustomGpuWithoutModel) {
  auto doc = TomlDocument::parse_string(
      "[gpu]\nname = 'x1'\nbf16_tflops = 100\nhbm_gbytes = 16\nhbm_gbytes_per_s = 1000\n"
      "num_sms = 20\n[node]\ngpus_per_node = 1\n",
      "t.toml");
  TomlTable root = doc.root();
  Topology t = parse_topology(root, "t");
  EXPECT_EQ(t.gpu_spec().name, "x1");
  EXPECT_DOUBLE_EQ(t.gpu_spec().bf16_flops_per_s, 100e12);
  EXPECT_EQ(t.gpu_spec().fp8_flops_per_s, 0);
  EXPECT_EQ(t.gpu_spec().hbm_bytes, 16'000'000'000);
  EXPECT_DOUBLE_EQ(t.gpu_spec().hbm_bytes_per_s, 1e12);
  EXPECT_EQ(t.gpu_spec().num_sms, 20);
  EXPECT_FALSE(t.gpu_spec().price_usd_per_hour.has_value());  // no price unless given
}

TEST(TopologyParser, EmbeddedTableErrorsCarryTheFullKeyPath) {
  auto doc = TomlDocument::parse_string(
      "[topology.gpu]\nmodel = 'h800-sxm'\n[topology.node]\ngpus_per_node = 8\n"
      "nvlink_domain_gpus = 12\nnvlink_gbytes_per_s = 160\nnvlink_latency_ns = 1\n"
      "nvswitch_latency_ns = 1\n",
      "scenario.toml");
  TomlTable topo = doc.root().get_table("topology");
  EXPECT_EQ(config_error_of([&] { parse_topology(topo, "embedded"); }),
            "scenario.toml:5:22: topology.node.nvlink_domain_gpus: must be a multiple of "
            "node.gpus_per_node (8)");
}

TEST(TopologyParser, BadCorpusGivesExactMessages) {
  const std::string dir = kSourceDir + "/tests/data/bad/topologies/";
  // File -> message after "<path>:".
  const std::map<std::string, std::string> expected = {
      {"unknown_key.toml",
       "6:1: node.nvlink_domain_gpu: unknown key 'nvlink_domain_gpu' (did you mean "
       "'nvlink_domain_gpus'?)"},
      {"missing_key.toml", "10:1: network.nic_latency_ns: missing required key (integer)"},
      {"wrong_type.toml", "5:17: node.gpus_per_node: expected an integer, got string"},
      {"negative_bandwidth.toml", "12:12: network.nic_gbps: must be >= 0"},
      {"host_pcie_not_positive.toml",
       "18:21: host.pcie_gbytes_per_s: must be > 0 (leave it out when not known)"},
      {"zero_gpus.toml", "5:17: node.gpus_per_node: must be >= 1"},
      {"domain_not_multiple.toml",
       "6:22: node.nvlink_domain_gpus: must be a multiple of node.gpus_per_node (4)"},
      {"unknown_gpu.toml",
       "2:9: gpu.model: unknown GPU 'h900-sxm' (known: gb200, h100-sxm, h200-sxm, h800-sxm, "
       "mi355x)"},
      {"syntax_error.toml",
       "5:17: TOML syntax error: Error while parsing value: could not determine value type"},
      {"no_spines.toml",
       "10:1: network.num_spines: must be >= 1: the network has 16 leaf switches"},
      {"nodes_split_a_domain.toml",
       "12:13: network.num_nodes: num_nodes x gpus_per_node (36) must be a multiple of "
       "node.nvlink_domain_gpus (72)"},
      {"mesh_with_switch_latency.toml",
       "9:23: node.nvswitch_latency_ns: applies only when fabric = \"nvswitch\""},
      {"custom_gpu_missing_hbm.toml", "1:1: gpu.hbm_gbytes: missing required key (number)"},
      {"custom_gpu_missing_sms.toml", "1:1: gpu.num_sms: missing required key (integer)"},
      {"sms_not_positive.toml", "3:11: gpu.num_sms: value 0 is out of range [1, 100000]"},
      {"oversubscription_below_one.toml", "15:20: network.oversubscription: must be in [1, 100]"},
      {"oversubscription_above_hundred.toml",
       "16:20: network.oversubscription: must be in [1, 100]"},
      {"nics_per_gpu_above_64.toml", "16:16: network.nics_per_gpu: must be at most 64"},
      {"peak_above_one_exaflop.toml", "4:15: gpu.bf16_tflops: must be at most 1000000 (1 EFLOP/s)"},
      {"hbm_bandwidth_above_one_petabyte_per_s.toml",
       "4:20: gpu.hbm_gbytes_per_s: must be at most 1000000 (1 PB/s)"},
      {"unknown_fabric.toml",
       "6:10: node.fabric: unknown value 'mesh' (valid: nvswitch, full_mesh)"},
      // Physical domains (issue 19): figures that would make every duration overflow.
      {"nic_below_one_byte_per_s.toml",
       "13:12: network.nic_gbps: 1e-300 Gbit/s is below 1 byte/s (8e-09 Gbit/s)"},
      {"nvlink_below_one_byte_per_s.toml",
       "7:23: node.nvlink_gbytes_per_s: 1e-300 GB/s is below 1 byte/s (1e-09 GB/s)"},
      {"latency_above_one_second.toml",
       "14:18: network.nic_latency_ns: must be at most 1000000000 (1 s)"},
      {"peak_below_one_flop_per_s.toml",
       "4:15: gpu.bf16_tflops: 1e-300 TFLOP/s is below 1 FLOP/s (1e-12 TFLOP/s)"},
      {"hbm_above_one_petabyte.toml", "4:14: gpu.hbm_gbytes: must be at most 1000000 (1 PB)"},
      {"price_not_positive.toml", "4:22: gpu.price_usd_per_hour: must be > 0 and < 1e9"},
      {"price_without_source.toml",
       "4:22: gpu.price_usd_per_hour: needs price_source (the publication or URL and the date the "
       "price is quoted from)"},
      {"source_without_price.toml", "4:16: gpu.price_source: given without price_usd_per_hour"},
  };
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    on_disk.insert(entry.path().filename().string());
  }
  EXPECT_EQ(on_disk.size(), expected.size()) << "every bad file needs an expected message";
  for (const auto& [file, message] : expected) {
    const std::string path = dir + file;  // clang 14 cannot capture a structured binding
    EXPECT_EQ(config_error_of([&] { load_topology(path); }), path + ":" + message);
  }
}

TEST(TopologyParser, MissingFileIsAConfigError) {
  EXPECT_EQ(config_error_of([] { load_topology("/nonexistent/x.toml"); }),
            "/nonexistent/x.toml: cannot open file");
}

}  // namespace
}  // namespace moesim::sim
