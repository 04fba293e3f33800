// `moesim collective`: one synthetic MoE layer's dispatch and combine on a topology, through one
// network model (sim/network/collective_study.h). Prints latency, per-GPU bytes and the
// bottleneck bandwidth (bytes on the bottleneck link / duration) with its link class, so results
// can be held against published kernel benchmarks (e.g. DeepEP's RDMA / NVLink GB/s).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "sim/calibration/network_fit.h"
#include "sim/config/config_error.h"
#include "sim/cost/profile.h"
#include "sim/network/collective_study.h"
#include "sim/network/network_model.h"
#include "sim/serving/network_models.h"
#include "sim/topology/topology_parser.h"

namespace moesim::cli {
namespace {

const char kUsage[] =
    "usage: moesim collective --topology FILE --ep N --tokens-per-gpu T --hidden H --top-k K\n"
    "         [--experts E] [--expert-groups G] [--topk-groups M]\n"
    "         [--dispatch-dtype fp8|bf16] [--combine-dtype bf16|fp8]\n"
    "         [--skew uniform|zipf:S|hot:F] [--algorithm direct|hierarchical|low_latency]\n"
    "         [--ll-transport nvlink|rdma]\n"
    "         [--model bottleneck|bottleneck_factored|fluid|simgrid] [--seed N]\n"
    "         [--profile PROFILE.toml] [--json]\n"
    "\n"
    "Runs one MoE dispatch and its combine over the first N GPUs of the topology and prints, for\n"
    "each: latency, bytes sent / received per GPU (min / mean / max), barrier wait per GPU, and\n"
    "the bottleneck link's class and bandwidth (its bytes / latency), the physical bytes per GPU\n"
    "over NVLink and over the network, and the logical bytes per rank as DeepEP's benchmark tests\n"
    "count them (intranode, internode, low-latency) with the bandwidth those figures imply\n"
    "(logical bytes / latency): compare those with DeepEP's published GB/s.\n"
    "\n"
    "  --topology FILE     topology TOML (topologies/*.toml)\n"
    "  --ep N              expert-parallel GPUs: GPUs 0 .. N-1 of the topology\n"
    "  --tokens-per-gpu T  tokens held by each GPU before dispatch\n"
    "  --hidden H          token row width in elements (hidden or latent size)\n"
    "  --top-k K           experts per token\n"
    "  --experts E         routed experts, placed contiguously (default 256; a multiple of N)\n"
    "  --expert-groups G   expert groups of the router (contiguous ranges; default 1)\n"
    "  --topk-groups M     groups each token keeps (default G: no limit); M < G is node-limited\n"
    "                      routing (DeepSeek-V3: G 8, M 4), which lowers the unique (token,\n"
    "                      node) pairs of hierarchical dispatch (docs/network.md)\n"
    "  --dispatch-dtype    fp8 (1 B/element + FP32 scale per 128) or bf16 (default fp8)\n"
    "  --combine-dtype     bf16 or fp8 (default bf16)\n"
    "  --skew              uniform, zipf:S (Zipf popularity, exponent S), or hot:F (one expert\n"
    "                      chosen by a fraction F of tokens) (default uniform)\n"
    "  --algorithm         direct, or hierarchical (DeepEP internode: once per node over the\n"
    "                      network to the same-rail GPU, then NVLink), or low_latency (DeepEP's\n"
    "                      low-latency kernels: every (token, expert) selection sent directly,\n"
    "                      no per-GPU deduplication) (default direct)\n"
    "  --ll-transport      low_latency only: nvlink (DeepEP's current kernels: NVLink within a\n"
    "                      node, RDMA beyond) or rdma (the original pure-RDMA kernels: every\n"
    "                      peer over the network, same-node ones too) (default nvlink)\n"
    "  --model             network model (default bottleneck; bottleneck_factored spreads each\n"
    "                      leaf's inter-leaf bytes evenly over its spines: docs/network.md)\n"
    "  --seed N            routing seed (default 1)\n"
    "  --profile FILE      apply a calibration profile's [network] section (per link class\n"
    "                      efficiency and latency, `moesim calibrate --topology`) to the\n"
    "                      topology, as a scenario with that profile does; with low_latency\n"
    "                      also its low-latency kernels' fixed cost ([[network.kernel]])\n"
    "  --json              one JSON document, units in key names\n";

int64_t required_int(Args& args, const std::string& name) {
  const std::optional<int64_t> v = args.int_value(name);
  if (!v) throw UsageError{"missing " + name};
  return *v;
}

sim::WireDtype wire_dtype(Args& args, const std::string& name, const std::string& dflt) {
  const std::string text = args.value_or(name, dflt);
  const std::optional<sim::WireDtype> dtype = sim::parse_wire_dtype(text);
  if (!dtype) throw UsageError{name + ": unknown dtype '" + text + "' (valid: bf16, fp8)"};
  return *dtype;
}

nlohmann::json phase_json(const sim::Topology& topology, const sim::CollectivePhase& phase,
                          const sim::KernelCost& kernel) {
  const sim::CollectiveResult& r = phase.result;
  nlohmann::json j;
  j["latency_us"] = sim::to_us(r.duration_ns);
  j["kernel_fixed_us"] = kernel.fixed_s * 1e6;
  j["bytes_per_token"] = phase.bytes_per_token;
  j["total_bytes"] = phase.traffic.total_bytes();
  j["num_flows"] = r.num_flows;
  j["sent_bytes"] = {{"min", phase.sent_bytes.min},
                     {"mean", phase.sent_bytes.mean},
                     {"max", phase.sent_bytes.max}};
  j["received_bytes"] = {{"min", phase.received_bytes.min},
                         {"mean", phase.received_bytes.mean},
                         {"max", phase.received_bytes.max}};
  j["barrier_wait_us"] = {{"min", phase.barrier_wait_ns.min / 1e3},
                          {"mean", phase.barrier_wait_ns.mean / 1e3},
                          {"max", phase.barrier_wait_ns.max / 1e3}};
  const sim::ByteAccounting& a = phase.accounting;
  const double seconds = sim::to_seconds(r.duration_ns);
  auto per_s = [&](double bytes) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; };
  j["physical"] = {{"nvlink_sent_bytes",
                    {{"min", a.nvlink_sent_bytes.min},
                     {"mean", a.nvlink_sent_bytes.mean},
                     {"max", a.nvlink_sent_bytes.max}}},
                   {"network_sent_bytes",
                    {{"min", a.network_sent_bytes.min},
                     {"mean", a.network_sent_bytes.mean},
                     {"max", a.network_sent_bytes.max}}}};
  j["logical"] = {{"intranode_bytes_per_rank", a.intranode_logical_bytes},
                  {"intranode_gbytes_per_s", per_s(a.intranode_logical_bytes)},
                  {"internode_bytes_per_rank", a.internode_logical_bytes},
                  {"internode_gbytes_per_s", per_s(a.internode_logical_bytes)},
                  {"low_latency_bytes_per_rank", a.low_latency_logical_bytes},
                  {"low_latency_gbytes_per_s", per_s(a.low_latency_logical_bytes)}};
  if (r.bottleneck_link >= 0) {
    const sim::Link& link = topology.links()[r.bottleneck_link];
    j["bottleneck"] = {{"link", r.bottleneck_link},
                       {"from", topology.vertex_name(link.from_vertex)},
                       {"to", topology.vertex_name(link.to_vertex)},
                       {"class", sim::link_class_name(r.bottleneck_class)},
                       {"bytes", r.bottleneck_bytes},
                       {"capacity_gbytes_per_s", r.bottleneck_capacity_bytes_per_s / 1e9},
                       {"bandwidth_gbytes_per_s", r.bottleneck_bytes_per_s() / 1e9}};
  } else {
    j["bottleneck"] = nullptr;
  }
  return j;
}

void print_phase(const char* label, const sim::Topology& topology,
                 const sim::CollectivePhase& phase, const sim::KernelCost& kernel) {
  const sim::CollectiveResult& r = phase.result;
  std::printf("%s: %.1f us, %d flows, %.0f bytes per token\n", label, sim::to_us(r.duration_ns),
              r.num_flows, phase.bytes_per_token);
  if (kernel.fixed_s > 0) {
    std::printf("  kernel cost       %.2f us fixed (profile), included above\n",
                kernel.fixed_s * 1e6);
  }
  std::printf("  sent per GPU      min %9.3f  mean %9.3f  max %9.3f MB\n",
              phase.sent_bytes.min / 1e6, phase.sent_bytes.mean / 1e6, phase.sent_bytes.max / 1e6);
  std::printf("  received per GPU  min %9.3f  mean %9.3f  max %9.3f MB\n",
              phase.received_bytes.min / 1e6, phase.received_bytes.mean / 1e6,
              phase.received_bytes.max / 1e6);
  std::printf("  barrier wait      min %9.1f  mean %9.1f  max %9.1f us\n",
              phase.barrier_wait_ns.min / 1e3, phase.barrier_wait_ns.mean / 1e3,
              phase.barrier_wait_ns.max / 1e3);
  const sim::ByteAccounting& a = phase.accounting;
  std::printf(
      "  physical sent     NVLink mean %9.3f  max %9.3f MB; network mean %9.3f  max %9.3f MB\n",
      a.nvlink_sent_bytes.mean / 1e6, a.nvlink_sent_bytes.max / 1e6,
      a.network_sent_bytes.mean / 1e6, a.network_sent_bytes.max / 1e6);
  const double seconds = sim::to_seconds(r.duration_ns);
  auto per_s = [&](double bytes) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; };
  std::printf(
      "  DeepEP logical    intranode %.3f MB/rank (%.1f GB/s), internode %.3f MB/rank (%.1f "
      "GB/s), low-latency %.3f MB/rank (%.1f GB/s)\n",
      a.intranode_logical_bytes / 1e6, per_s(a.intranode_logical_bytes),
      a.internode_logical_bytes / 1e6, per_s(a.internode_logical_bytes),
      a.low_latency_logical_bytes / 1e6, per_s(a.low_latency_logical_bytes));
  if (r.bottleneck_link < 0) {
    std::printf("  bottleneck        none (no bytes cross a link)\n");
    return;
  }
  const sim::Link& link = topology.links()[r.bottleneck_link];
  std::printf("  bottleneck        %s link %s -> %s: %.3f MB, %.1f GB/s achieved of %.1f GB/s\n",
              sim::link_class_name(r.bottleneck_class),
              topology.vertex_name(link.from_vertex).c_str(),
              topology.vertex_name(link.to_vertex).c_str(), r.bottleneck_bytes / 1e6,
              r.bottleneck_bytes_per_s() / 1e9, r.bottleneck_capacity_bytes_per_s / 1e9);
}

}  // namespace

int collective_command(const std::vector<std::string>& argv) {
  Args args(argv, {"--topology", "--ep", "--tokens-per-gpu", "--hidden", "--top-k", "--experts",
                   "--expert-groups", "--topk-groups", "--dispatch-dtype", "--combine-dtype",
                   "--skew", "--algorithm", "--ll-transport", "--model", "--seed", "--profile"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::optional<std::string> topology_path = args.value("--topology");
  if (!topology_path) throw UsageError{"missing --topology"};
  sim::CollectiveStudySpec spec;
  spec.ep_size = static_cast<int32_t>(required_int(args, "--ep"));
  spec.tokens_per_gpu = required_int(args, "--tokens-per-gpu");
  spec.hidden = required_int(args, "--hidden");
  spec.top_k = static_cast<int32_t>(required_int(args, "--top-k"));
  spec.num_experts = static_cast<int32_t>(args.int_value("--experts").value_or(256));
  spec.num_groups = static_cast<int32_t>(args.int_value("--expert-groups").value_or(1));
  spec.topk_groups =
      static_cast<int32_t>(args.int_value("--topk-groups").value_or(spec.num_groups));
  spec.dispatch_dtype = wire_dtype(args, "--dispatch-dtype", "fp8");
  spec.combine_dtype = wire_dtype(args, "--combine-dtype", "bf16");
  std::string error;
  const std::string skew_text = args.value_or("--skew", "uniform");
  const std::optional<sim::ExpertSkew> skew = sim::parse_expert_skew(skew_text, &error);
  if (!skew) throw UsageError{"--skew: " + error};
  spec.skew = *skew;
  const std::string algorithm_text = args.value_or("--algorithm", "direct");
  const std::optional<sim::DispatchAlgorithm> algorithm =
      sim::parse_dispatch_algorithm(algorithm_text);
  if (!algorithm) {
    throw UsageError{"--algorithm: unknown '" + algorithm_text +
                     "' (valid: direct, hierarchical, low_latency)"};
  }
  spec.algorithm = *algorithm;
  const std::optional<std::string> transport_text = args.value("--ll-transport");
  if (transport_text) {
    const std::optional<sim::LowLatencyTransport> transport =
        sim::parse_low_latency_transport(*transport_text);
    if (!transport) {
      throw UsageError{"--ll-transport: unknown '" + *transport_text + "' (valid: nvlink, rdma)"};
    }
    if (spec.algorithm != sim::DispatchAlgorithm::kLowLatency) {
      throw UsageError{"--ll-transport: applies to --algorithm low_latency only"};
    }
    spec.transport = *transport;
  }
  const std::optional<int64_t> seed = args.int_value("--seed");
  if (seed && *seed < 0) throw UsageError{"--seed: must be >= 0"};
  spec.seed = static_cast<uint64_t>(seed.value_or(1));
  const std::string model_name = args.value_or("--model", "bottleneck");
  const std::optional<std::string> profile_path = args.value("--profile");
  const bool json = args.flag("--json");
  args.finish(0);

  const sim::Topology topology = [&] {
    sim::Topology nominal = sim::load_topology(*topology_path);
    sim::TopologySpec calibrated = nominal.spec();
    if (profile_path) {
      const sim::CalibrationProfile profile = sim::load_profile(*profile_path);
      if (profile.network.empty()) {
        throw UsageError{"--profile: " + *profile_path + " has no [network] section"};
      }
      calibrated = sim::apply_network_calibration(nominal.spec(), profile.network);
      if (spec.algorithm == sim::DispatchAlgorithm::kLowLatency) {
        spec.dispatch_kernel =
            sim::kernel_cost(profile.network, sim::kLowLatencyDispatchKernel, spec.transport);
        spec.combine_kernel =
            sim::kernel_cost(profile.network, sim::kLowLatencyCombineKernel, spec.transport);
      }
    }
    if (spec.transport == sim::LowLatencyTransport::kRdma) {
      if (!(nominal.nic_bytes_per_s_per_gpu() > 0)) {
        throw UsageError{"--ll-transport: rdma needs a network (topology " + nominal.name() +
                         " has no NICs)"};
      }
      return sim::Topology(sim::rdma_only_spec(calibrated));
    }
    return sim::Topology(calibrated);
  }();
  if (const std::string problem = sim::check_collective_study_spec(spec, topology);
      !problem.empty()) {
    throw UsageError{problem};
  }
  std::unique_ptr<sim::NetworkModel> model;
  try {
    model = sim::builtin_network_models().make(model_name, topology, "--model");
  } catch (const sim::ConfigError& e) {
    throw UsageError{"--model: " + e.reason()};
  }
  const sim::CollectiveStudy study = sim::run_collective_study(topology, *model, spec);

  if (json) {
    nlohmann::json j;
    j["topology"] = topology.name();
    j["ep"] = spec.ep_size;
    j["tokens_per_gpu"] = spec.tokens_per_gpu;
    j["hidden"] = spec.hidden;
    j["top_k"] = spec.top_k;
    j["experts"] = spec.num_experts;
    j["expert_groups"] = spec.num_groups;
    j["topk_groups"] = spec.topk_groups;
    j["dispatch_dtype"] = sim::wire_dtype_name(spec.dispatch_dtype);
    j["combine_dtype"] = sim::wire_dtype_name(spec.combine_dtype);
    j["skew"] = sim::expert_skew_name(spec.skew);
    j["algorithm"] = algorithm_text;
    j["ll_transport"] = spec.algorithm == sim::DispatchAlgorithm::kLowLatency
                            ? nlohmann::json(sim::low_latency_transport_name(spec.transport))
                            : nlohmann::json(nullptr);
    j["model"] = model_name;
    j["seed"] = spec.seed;
    j["profile"] = profile_path ? nlohmann::json(*profile_path) : nlohmann::json(nullptr);
    j["dispatch"] = phase_json(topology, study.dispatch, spec.dispatch_kernel);
    j["combine"] = phase_json(topology, study.combine, spec.combine_kernel);
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return 0;
  }
  const std::string algorithm_label = spec.algorithm == sim::DispatchAlgorithm::kLowLatency
                                          ? algorithm_text + " (" +
                                                (spec.transport == sim::LowLatencyTransport::kRdma
                                                     ? "pure RDMA: every peer over the network"
                                                     : "NVLink within a node, RDMA beyond") +
                                                ")"
                                          : algorithm_text;
  std::printf(
      "collective on %s: EP %d (GPUs 0-%d of %d), %lld tokens/GPU, hidden %lld, top-%d of %d "
      "experts (top-%d of %d groups), skew %s, %s, model %s, seed %llu%s\n",
      topology.name().c_str(), spec.ep_size, spec.ep_size - 1, topology.num_gpus(),
      static_cast<long long>(spec.tokens_per_gpu), static_cast<long long>(spec.hidden), spec.top_k,
      spec.num_experts, spec.topk_groups, spec.num_groups, sim::expert_skew_name(spec.skew).c_str(),
      algorithm_label.c_str(), model_name.c_str(), static_cast<unsigned long long>(spec.seed),
      profile_path ? (", network calibrated by " + *profile_path).c_str() : "");
  print_phase(("dispatch (" + std::string(sim::wire_dtype_name(spec.dispatch_dtype)) + ")").c_str(),
              topology, study.dispatch, spec.dispatch_kernel);
  print_phase(("combine (" + std::string(sim::wire_dtype_name(spec.combine_dtype)) + ")").c_str(),
              topology, study.combine, spec.combine_kernel);
  return 0;
}

}  // namespace moesim::cli
