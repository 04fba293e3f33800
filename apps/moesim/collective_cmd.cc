// `moesim collective`: one synthetic MoE layer's dispatch and combine on a topology, through one
// network model (sim/api/collective.h). Prints latency, per-GPU bytes and the bottleneck
// bandwidth (bytes on the bottleneck link / duration) with its link class, so results can be held
// against published kernel benchmarks (e.g. DeepEP's RDMA / NVLink GB/s).
#include <iostream>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "sim/api/collective.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Runs one MoE dispatch and its combine over the first N GPUs of the topology and prints, for\n"
    "each: latency, bytes sent / received per GPU (min / mean / max), barrier wait per GPU, and\n"
    "the bottleneck link's class and bandwidth (its bytes / latency), the physical bytes per GPU\n"
    "over NVLink and over the network, and the logical bytes per rank as DeepEP's benchmark tests\n"
    "count them (intranode, internode, low-latency) with the bandwidth those figures imply\n"
    "(logical bytes / latency): compare those with DeepEP's published GB/s.";

void declare_layer(CommandLine& cl, sim::api::CollectiveRequest& r, std::optional<int64_t>& experts,
                   std::optional<int64_t>& groups) {
  cl.option("--ep", &r.ep, "N", "expert-parallel GPUs: GPUs 0 .. N-1 of the topology")
      .option("--tokens-per-gpu", &r.tokens_per_gpu, "T", "tokens held by each GPU before dispatch")
      .option("--hidden", &r.hidden, "H", "token row width in elements (hidden or latent size)")
      .option("--top-k", &r.top_k, "K", "experts per token")
      .option("--experts", &experts, "E",
              "routed experts, placed contiguously (default 256; a multiple of N)")
      .option("--expert-groups", &groups, "G",
              "expert groups of the router (contiguous ranges; default 1)")
      .option("--topk-groups", &r.topk_groups, "M",
              "groups each token keeps (default G: no limit); M < G is node-limited routing "
              "(DeepSeek-V3: G 8, M 4), which lowers the unique (token, node) pairs of "
              "hierarchical dispatch (docs/network.md)");
}

void declare_wire(CommandLine& cl, std::optional<std::string>& dispatch,
                  std::optional<std::string>& combine, std::optional<std::string>& skew,
                  std::optional<std::string>& algorithm, sim::api::CollectiveRequest& r) {
  cl.option("--dispatch-dtype", &dispatch, "fp8|bf16",
            "fp8 (1 B/element + FP32 scale per 128) or bf16 (default fp8)")
      .option("--combine-dtype", &combine, "bf16|fp8", "bf16 or fp8 (default bf16)")
      .option("--skew", &skew, "SKEW",
              "uniform, zipf:S (Zipf popularity, exponent S), or hot:F (one expert chosen by a "
              "fraction F of tokens) (default uniform)")
      .option("--algorithm", &algorithm, "NAME",
              "direct, or hierarchical (DeepEP internode: once per node over the network to the "
              "same-rail GPU, then NVLink), or low_latency (DeepEP's low-latency kernels: every "
              "(token, expert) selection sent directly, no per-GPU deduplication) (default "
              "direct)")
      .option("--ll-transport", &r.ll_transport, "nvlink|rdma",
              "low_latency only: nvlink (DeepEP's current kernels: NVLink within a node, RDMA "
              "beyond) or rdma (the original pure-RDMA kernels: every peer over the network, "
              "same-node ones too) (default nvlink)");
}

}  // namespace

int collective_command(const std::vector<std::string>& argv) {
  sim::api::CollectiveRequest r;
  std::optional<std::string> topology, dispatch, combine, skew, algorithm, network_model;
  std::optional<int64_t> experts, groups;
  bool json = false;
  CommandLine cl(
      "collective --topology FILE --ep N --tokens-per-gpu T --hidden H --top-k K "
      "[options]",
      kDescription);
  cl.option("--topology", &topology, "FILE", "topology TOML (topologies/*.toml)");
  declare_layer(cl, r, experts, groups);
  declare_wire(cl, dispatch, combine, skew, algorithm, r);
  cl.option("--network-model", &network_model, "NAME",
            "network model: bottleneck (default), bottleneck_factored (spreads each leaf's "
            "inter-leaf bytes evenly over its spines: docs/network.md), fluid, simgrid")
      .option("--seed", &r.seed, "N", "routing seed (default 1)")
      .option("--profile", &r.profile_path, "FILE",
              "apply a calibration profile's [network] section (per link class efficiency and "
              "latency, `moesim calibrate --topology`) to the topology, as a scenario with that "
              "profile does; with low_latency also its low-latency kernels' fixed cost "
              "([[network.kernel]])")
      .flag("--json", &json, "one JSON document, units in key names");
  if (!cl.parse(argv)) return 0;
  if (topology) r.topology_path = *topology;
  if (experts) r.experts = *experts;
  if (groups) r.expert_groups = *groups;
  if (dispatch) r.dispatch_dtype = *dispatch;
  if (combine) r.combine_dtype = *combine;
  if (skew) r.skew = *skew;
  if (algorithm) r.algorithm = *algorithm;
  if (network_model) r.network_model = *network_model;
  const sim::api::CollectiveReport report = sim::api::collective(r);
  if (json) {
    std::cout << sim::api::collective_json(report).dump(2) << "\n";
  } else {
    sim::api::write_collective_text(std::cout, report);
  }
  return 0;
}

}  // namespace moesim::cli
