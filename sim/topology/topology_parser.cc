#include "sim/topology/topology_parser.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <utility>

namespace moesim::sim {
namespace {

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;

int32_t get_i32_or(TomlTable& t, std::string_view key, int32_t default_value) {
  return static_cast<int32_t>(t.get_int_in_or(key, std::numeric_limits<int32_t>::min(),
                                              std::numeric_limits<int32_t>::max(), default_value));
}
int32_t get_i32(TomlTable& t, std::string_view key) {
  return static_cast<int32_t>(
      t.get_int_in(key, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
}

// Rejects `key` when present: it has no meaning in this configuration.
void reject_key(const TomlTable& t, std::string_view key, const std::string& applies_when) {
  if (t.has(key)) t.fail(key, "applies only when " + applies_when);
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// Domains of physical figures (issue 19). A positive rate below one unit per second (1 byte/s,
// 1 FLOP/s) is no hardware, and it turns every transfer or op into centuries; 0 and negative
// values are left to check_topology_spec(), which knows where 0 means "none".
void check_rate(const TomlTable& t, std::string_view key, double file_value, double unit_per_s,
                const char* file_unit, const char* one) {
  if (t.has(key) && file_value > 0 && file_value * unit_per_s < 1) {
    t.fail(key, number_text(file_value) + " " + file_unit + " is below 1 " + one + " (" +
                    number_text(1 / unit_per_s) + " " + file_unit + ")");
  }
}

// A link or switch latency above 1 s is no interconnect (they are 0.1 to 10 us); the bound also
// keeps a route's sum of latencies far inside int64 nanoseconds.
constexpr int64_t kMaxLatencyNs = 1'000'000'000;
SimTime get_latency_ns(TomlTable& t, std::string_view key) {
  const int64_t ns = t.get_int(key);
  if (ns > kMaxLatencyNs) t.fail(key, "must be at most 1000000000 (1 s)");
  return ns;
}

// HBM beyond 1 PB per GPU is no hardware (and its bytes must fit int64).
constexpr double kMaxHbmGbytes = 1e6;
// Streaming multiprocessors of one GPU: today's largest have a few hundred.
constexpr int64_t kMaxSms = 100000;

GpuSpec parse_gpu(TomlTable& t) {
  GpuSpec gpu;
  std::optional<std::string> model = t.find_string("model");
  if (model) {
    std::optional<GpuSpec> known = find_gpu_spec(*model);
    if (!known) {
      std::string list;
      for (const std::string& n : gpu_spec_names()) list += (list.empty() ? "" : ", ") + n;
      t.fail("model", "unknown GPU '" + *model + "' (known: " + list + ")");
    }
    gpu = *known;
  }
  // With a model every figure defaults to the catalogue's; without one, name, bf16_tflops,
  // hbm_gbytes, hbm_gbytes_per_s and num_sms are required and other dtypes default to 0
  // (unsupported).
  auto number = [&](std::string_view key, double catalogue_value, double unit) {
    return model ? t.get_double_or(key, catalogue_value / unit) * unit : t.get_double(key) * unit;
  };
  auto optional_number = [&](std::string_view key, double catalogue_value, double unit) {
    return t.get_double_or(key, catalogue_value / unit) * unit;
  };
  gpu.name = model ? t.get_string_or("name", gpu.name) : t.get_string("name");
  gpu.fp32_flops_per_s = optional_number("fp32_tflops", gpu.fp32_flops_per_s, kTera);
  gpu.tf32_flops_per_s = optional_number("tf32_tflops", gpu.tf32_flops_per_s, kTera);
  gpu.bf16_flops_per_s = number("bf16_tflops", gpu.bf16_flops_per_s, kTera);
  gpu.fp8_flops_per_s = optional_number("fp8_tflops", gpu.fp8_flops_per_s, kTera);
  gpu.fp4_flops_per_s = optional_number("fp4_tflops", gpu.fp4_flops_per_s, kTera);
  for (auto [key, flops_per_s] : {std::pair{"fp32_tflops", gpu.fp32_flops_per_s},
                                  {"tf32_tflops", gpu.tf32_flops_per_s},
                                  {"bf16_tflops", gpu.bf16_flops_per_s},
                                  {"fp8_tflops", gpu.fp8_flops_per_s},
                                  {"fp4_tflops", gpu.fp4_flops_per_s}}) {
    check_rate(t, key, flops_per_s / kTera, kTera, "TFLOP/s", "FLOP/s");
  }
  const double hbm_bytes = number("hbm_gbytes", static_cast<double>(gpu.hbm_bytes), kGiga);
  if (hbm_bytes > kMaxHbmGbytes * kGiga) t.fail("hbm_gbytes", "must be at most 1000000 (1 PB)");
  gpu.hbm_bytes = std::llround(hbm_bytes);
  gpu.hbm_bytes_per_s = number("hbm_gbytes_per_s", gpu.hbm_bytes_per_s, kGiga);
  check_rate(t, "hbm_gbytes_per_s", gpu.hbm_bytes_per_s / kGiga, kGiga, "GB/s", "byte/s");
  gpu.num_sms = static_cast<int32_t>(model ? t.get_int_in_or("num_sms", 1, kMaxSms, gpu.num_sms)
                                           : t.get_int_in("num_sms", 1, kMaxSms));
  // Not a hardware figure: no catalogue default, absent unless given.
  gpu.price_usd_per_hour = t.find_double("price_usd_per_hour");
  if (gpu.price_usd_per_hour && !(*gpu.price_usd_per_hour > 0 && *gpu.price_usd_per_hour < 1e9)) {
    t.fail("price_usd_per_hour", "must be > 0 and < 1e9");
  }
  // A price is quoted from somewhere: the source is required with it and meaningless without.
  const std::optional<std::string> source = t.find_string("price_source");
  if (gpu.price_usd_per_hour && (!source || source->empty())) {
    t.fail("price_usd_per_hour",
           "needs price_source (the publication or URL and the date the price is quoted from)");
  }
  if (source && !gpu.price_usd_per_hour) t.fail("price_source", "given without price_usd_per_hour");
  gpu.price_source = source.value_or("");
  return gpu;
}

void parse_node(TomlTable& t, TopologySpec& spec) {
  spec.gpus_per_node = get_i32(t, "gpus_per_node");
  if (spec.gpus_per_node < 1) t.fail("gpus_per_node", "must be >= 1");
  spec.nvlink_domain_gpus = get_i32_or(t, "nvlink_domain_gpus", spec.gpus_per_node);
  // In the spec 0 stands for "gpus_per_node"; in the file the default does.
  if (spec.nvlink_domain_gpus < 1) t.fail("nvlink_domain_gpus", "must be >= 1");
  spec.fabric = t.get_enum_or("fabric", {"nvswitch", "full_mesh"}, "nvswitch") == "full_mesh"
                    ? ScaleUpFabric::kFullMesh
                    : ScaleUpFabric::kSwitch;
  if (spec.nvlink_domain_gpus > 1) {
    const double nvlink_gbytes_per_s = t.get_double("nvlink_gbytes_per_s");
    check_rate(t, "nvlink_gbytes_per_s", nvlink_gbytes_per_s, kGiga, "GB/s", "byte/s");
    spec.nvlink_bytes_per_s = nvlink_gbytes_per_s * kGiga;  // line rate
    spec.nvlink_efficiency = kDefaultNvlinkEfficiency;
    spec.nvlink_latency_ns = get_latency_ns(t, "nvlink_latency_ns");
    if (spec.fabric == ScaleUpFabric::kSwitch) {
      spec.nvswitch_latency_ns = get_latency_ns(t, "nvswitch_latency_ns");
    } else {
      reject_key(t, "nvswitch_latency_ns", "fabric = \"nvswitch\"");
    }
  } else {
    const std::string when = "an NVLink domain has more than one GPU";
    for (auto key : {"fabric", "nvlink_gbytes_per_s", "nvlink_latency_ns", "nvswitch_latency_ns"}) {
      reject_key(t, key, when);
    }
  }
}

void parse_network(TomlTable& t, TopologySpec& spec) {
  spec.num_nodes = get_i32(t, "num_nodes");
  if (spec.num_nodes < 1) t.fail("num_nodes", "must be >= 1");
  const int64_t num_gpus = int64_t{spec.num_nodes} * spec.gpus_per_node;
  const bool one_domain = spec.nvlink_domain_gpus > 0 && num_gpus <= spec.nvlink_domain_gpus;
  const double nic_gbps = one_domain ? t.get_double_or("nic_gbps", 0) : t.get_double("nic_gbps");
  check_rate(t, "nic_gbps", nic_gbps, kGiga / 8, "Gbit/s", "byte/s");
  spec.nic_bytes_per_s = nic_gbps * kGiga / 8;
  const char* nic_keys[] = {"nics_per_gpu",      "nic_latency_ns",       "rail_optimized",
                            "leaf_gpus",         "num_spines",           "oversubscription",
                            "switch_latency_ns", "leaf_spine_latency_ns"};
  if (nic_gbps == 0) {
    for (auto key : nic_keys) reject_key(t, key, "network.nic_gbps > 0");
    return;
  }
  spec.nics_per_gpu = get_i32_or(t, "nics_per_gpu", 1);
  spec.nic_latency_ns = get_latency_ns(t, "nic_latency_ns");
  spec.rail_optimized = t.get_bool_or("rail_optimized", true);
  spec.leaf_gpus = get_i32(t, "leaf_gpus");
  spec.num_spines = get_i32_or(t, "num_spines", 0);
  spec.oversubscription = t.get_double_or("oversubscription", 1.0);
  spec.switch_latency_ns = get_latency_ns(t, "switch_latency_ns");
  if (spec.num_spines > 0) {
    spec.leaf_spine_latency_ns = get_latency_ns(t, "leaf_spine_latency_ns");
  } else {
    reject_key(t, "leaf_spine_latency_ns", "network.num_spines > 0");
  }
}

// [host]: every key optional; a figure given must be > 0 (0 is the default "not declared").
void parse_host(TomlTable& t, HostSpec& host) {
  auto positive = [&t](std::string_view key, double hi) {
    const double v = t.get_double_in_or(key, 0.0, hi, 0.0);
    if (t.has(key) && !(v > 0)) t.fail(key, "must be > 0 (leave it out when not known)");
    return v;
  };
  host.pcie_bytes_per_s = positive("pcie_gbytes_per_s", 1e6) * kGiga;
  check_rate(t, "pcie_gbytes_per_s", host.pcie_bytes_per_s / kGiga, kGiga, "GB/s", "byte/s");
  host.dram_bytes = std::llround(positive("dram_gbytes", 1e9) * kGiga);
  host.nvme_bytes = std::llround(positive("nvme_gbytes", 1e9) * kGiga);
  host.nvme_bytes_per_s = positive("nvme_gbytes_per_s", 1e6) * kGiga;
  check_rate(t, "nvme_gbytes_per_s", host.nvme_bytes_per_s / kGiga, kGiga, "GB/s", "byte/s");
  if (t.has("pcie_latency_ns")) {
    host.pcie_latency_ns = get_latency_ns(t, "pcie_latency_ns");
    if (host.pcie_latency_ns < 0) t.fail("pcie_latency_ns", "must be >= 0");
  }
  if (t.has("nvme_latency_ns")) {
    host.nvme_latency_ns = get_latency_ns(t, "nvme_latency_ns");
    if (host.nvme_latency_ns < 0) t.fail("nvme_latency_ns", "must be >= 0");
  }
}

}  // namespace

TopologySpec parse_topology_spec(TomlTable& table, const std::string& name) {
  TopologySpec spec;
  spec.name = name;
  spec.description = table.get_string_or("description", "");
  TomlTable gpu = table.get_table("gpu");
  spec.gpu = parse_gpu(gpu);
  gpu.finish();
  TomlTable node = table.get_table("node");
  parse_node(node, spec);
  node.finish();
  std::optional<TomlTable> network = table.find_table("network");
  if (network) {
    parse_network(*network, spec);
    network->finish();
  } else {
    spec.num_nodes = 1;
  }
  if (std::optional<TomlTable> host = table.find_table("host")) {
    parse_host(*host, spec.host);
    host->finish();
  }
  table.finish();

  SpecProblem problem = check_topology_spec(spec);
  if (!problem.ok()) {
    const std::string& path = problem.key_path;
    const size_t dot = path.find('.');
    const std::string section = path.substr(0, dot);
    const std::string key = path.substr(dot + 1);
    if (section == "gpu") gpu.fail(key, problem.reason);
    if (section == "node") node.fail(key, problem.reason);
    if (section == "network" && network) network->fail(key, problem.reason);
    table.fail(path, problem.reason);
  }
  return spec;
}

Topology parse_topology(TomlTable& table, const std::string& name) {
  return Topology(parse_topology_spec(table, name));
}

Topology load_topology(const std::string& path) {
  TomlDocument doc = TomlDocument::load_file(path);
  TomlTable root = doc.root();
  return parse_topology(root, std::filesystem::path(path).stem().string());
}

}  // namespace moesim::sim
