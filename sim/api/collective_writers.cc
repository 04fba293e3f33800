// The writers of a collective study's report (collective.h): `moesim collective`'s JSON document
// and text.
#include "sim/api/collective.h"
#include "sim/api/text_format.h"
#include "sim/network/network_model.h"

namespace moesim::sim::api {
namespace {

nlohmann::json min_mean_max_json(const study::MinMeanMax& m, double scale = 1.0) {
  return {{"min", m.min / scale}, {"mean", m.mean / scale}, {"max", m.max / scale}};
}

nlohmann::json bottleneck_json(const Topology& topology, const CollectiveResult& r) {
  if (r.bottleneck_link < 0) return nullptr;
  const Link& link = topology.links()[r.bottleneck_link];
  return {{"link", r.bottleneck_link},
          {"from", topology.vertex_name(link.from_vertex)},
          {"to", topology.vertex_name(link.to_vertex)},
          {"class", link_class_name(r.bottleneck_class)},
          {"bytes", r.bottleneck_bytes},
          {"capacity_gbytes_per_s", r.bottleneck_capacity_bytes_per_s / 1e9},
          {"bandwidth_gbytes_per_s", r.bottleneck_bytes_per_s() / 1e9}};
}

nlohmann::json phase_json(const Topology& topology, const study::CollectivePhase& phase,
                          const KernelCost& kernel) {
  const CollectiveResult& r = phase.result;
  nlohmann::json j;
  j["latency_us"] = to_us(r.duration_ns);
  j["kernel_fixed_us"] = kernel.fixed_s * 1e6;
  j["bytes_per_token"] = phase.bytes_per_token;
  j["total_bytes"] = phase.traffic.total_bytes();
  j["num_flows"] = r.num_flows;
  j["sent_bytes"] = min_mean_max_json(phase.sent_bytes);
  j["received_bytes"] = min_mean_max_json(phase.received_bytes);
  j["barrier_wait_us"] = min_mean_max_json(phase.barrier_wait_ns, 1e3);
  const study::ByteAccounting& a = phase.accounting;
  const double seconds = to_seconds(r.duration_ns);
  auto per_s = [&](double bytes) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; };
  j["physical"] = {{"nvlink_sent_bytes", min_mean_max_json(a.nvlink_sent_bytes)},
                   {"network_sent_bytes", min_mean_max_json(a.network_sent_bytes)}};
  j["logical"] = {{"intranode_bytes_per_rank", a.intranode_logical_bytes},
                  {"intranode_gbytes_per_s", per_s(a.intranode_logical_bytes)},
                  {"internode_bytes_per_rank", a.internode_logical_bytes},
                  {"internode_gbytes_per_s", per_s(a.internode_logical_bytes)},
                  {"low_latency_bytes_per_rank", a.low_latency_logical_bytes},
                  {"low_latency_gbytes_per_s", per_s(a.low_latency_logical_bytes)}};
  j["bottleneck"] = bottleneck_json(topology, r);
  return j;
}

void write_phase(std::ostream& os, const std::string& label, const Topology& topology,
                 const study::CollectivePhase& phase, const KernelCost& kernel) {
  const CollectiveResult& r = phase.result;
  os << format_text("%s: %.1f us, %d flows, %.0f bytes per token\n", label.c_str(),
                    to_us(r.duration_ns), r.num_flows, phase.bytes_per_token);
  if (kernel.fixed_s > 0) {
    os << format_text("  kernel cost       %.2f us fixed (profile), included above\n",
                      kernel.fixed_s * 1e6);
  }
  os << format_text("  sent per GPU      min %9.3f  mean %9.3f  max %9.3f MB\n",
                    phase.sent_bytes.min / 1e6, phase.sent_bytes.mean / 1e6,
                    phase.sent_bytes.max / 1e6);
  os << format_text("  received per GPU  min %9.3f  mean %9.3f  max %9.3f MB\n",
                    phase.received_bytes.min / 1e6, phase.received_bytes.mean / 1e6,
                    phase.received_bytes.max / 1e6);
  os << format_text("  barrier wait      min %9.1f  mean %9.1f  max %9.1f us\n",
                    phase.barrier_wait_ns.min / 1e3, phase.barrier_wait_ns.mean / 1e3,
                    phase.barrier_wait_ns.max / 1e3);
  const study::ByteAccounting& a = phase.accounting;
  os << format_text(
      "  physical sent     NVLink mean %9.3f  max %9.3f MB; network mean %9.3f  max %9.3f MB\n",
      a.nvlink_sent_bytes.mean / 1e6, a.nvlink_sent_bytes.max / 1e6,
      a.network_sent_bytes.mean / 1e6, a.network_sent_bytes.max / 1e6);
  const double seconds = to_seconds(r.duration_ns);
  auto per_s = [&](double bytes) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; };
  os << format_text(
      "  DeepEP logical    intranode %.3f MB/rank (%.1f GB/s), internode %.3f MB/rank (%.1f "
      "GB/s), low-latency %.3f MB/rank (%.1f GB/s)\n",
      a.intranode_logical_bytes / 1e6, per_s(a.intranode_logical_bytes),
      a.internode_logical_bytes / 1e6, per_s(a.internode_logical_bytes),
      a.low_latency_logical_bytes / 1e6, per_s(a.low_latency_logical_bytes));
  if (r.bottleneck_link < 0) {
    os << "  bottleneck        none (no bytes cross a link)\n";
    return;
  }
  const Link& link = topology.links()[r.bottleneck_link];
  os << format_text(
      "  bottleneck        %s link %s -> %s: %.3f MB, %.1f GB/s achieved of %.1f GB/s\n",
      link_class_name(r.bottleneck_class), topology.vertex_name(link.from_vertex).c_str(),
      topology.vertex_name(link.to_vertex).c_str(), r.bottleneck_bytes / 1e6,
      r.bottleneck_bytes_per_s() / 1e9, r.bottleneck_capacity_bytes_per_s / 1e9);
}

std::string algorithm_label(const CollectiveReport& report) {
  const study::CollectiveStudySpec& spec = report.spec;
  if (spec.algorithm != DispatchAlgorithm::kLowLatency) return report.request.algorithm;
  return report.request.algorithm + " (" +
         (spec.transport == LowLatencyTransport::kRdma ? "pure RDMA: every peer over the network"
                                                       : "NVLink within a node, RDMA beyond") +
         ")";
}

}  // namespace

nlohmann::json collective_json(const CollectiveReport& report) {
  const study::CollectiveStudySpec& spec = report.spec;
  const CollectiveRequest& q = report.request;
  nlohmann::json j;
  j["topology"] = report.topology.name();
  j["ep"] = spec.ep_size;
  j["tokens_per_gpu"] = spec.tokens_per_gpu;
  j["hidden"] = spec.hidden;
  j["top_k"] = spec.top_k;
  j["experts"] = spec.num_experts;
  j["expert_groups"] = spec.num_groups;
  j["topk_groups"] = spec.topk_groups;
  j["dispatch_dtype"] = wire_dtype_name(spec.dispatch_dtype);
  j["combine_dtype"] = wire_dtype_name(spec.combine_dtype);
  j["skew"] = study::expert_skew_name(spec.skew);
  j["algorithm"] = q.algorithm;
  j["ll_transport"] = spec.algorithm == DispatchAlgorithm::kLowLatency
                          ? nlohmann::json(low_latency_transport_name(spec.transport))
                          : nlohmann::json(nullptr);
  j["model"] = q.network_model;
  j["seed"] = spec.seed;
  j["profile"] = q.profile_path ? nlohmann::json(*q.profile_path) : nlohmann::json(nullptr);
  j["dispatch"] = phase_json(report.topology, report.study.dispatch, spec.dispatch_kernel);
  j["combine"] = phase_json(report.topology, report.study.combine, spec.combine_kernel);
  return j;
}

void write_collective_text(std::ostream& os, const CollectiveReport& report) {
  const study::CollectiveStudySpec& spec = report.spec;
  const CollectiveRequest& q = report.request;
  const Topology& topology = report.topology;
  os << format_text(
      "collective on %s: EP %d (GPUs 0-%d of %d), %lld tokens/GPU, hidden %lld, top-%d of %d "
      "experts (top-%d of %d groups), skew %s, %s, model %s, seed %llu%s\n",
      topology.name().c_str(), spec.ep_size, spec.ep_size - 1, topology.num_gpus(),
      static_cast<long long>(spec.tokens_per_gpu), static_cast<long long>(spec.hidden), spec.top_k,
      spec.num_experts, spec.topk_groups, spec.num_groups,
      study::expert_skew_name(spec.skew).c_str(), algorithm_label(report).c_str(),
      q.network_model.c_str(), static_cast<unsigned long long>(spec.seed),
      q.profile_path ? (", network calibrated by " + *q.profile_path).c_str() : "");
  write_phase(os, "dispatch (" + std::string(wire_dtype_name(spec.dispatch_dtype)) + ")", topology,
              report.study.dispatch, spec.dispatch_kernel);
  write_phase(os, "combine (" + std::string(wire_dtype_name(spec.combine_dtype)) + ")", topology,
              report.study.combine, spec.combine_kernel);
}

}  // namespace moesim::sim::api
