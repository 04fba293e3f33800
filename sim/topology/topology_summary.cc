#include "sim/topology/topology_summary.h"

#include <algorithm>
#include <cstdio>

#include "sim/topology/bisection.h"

namespace moesim::sim {
namespace {

// Shortest decimal form with up to 6 significant digits.
std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string gbytes_per_s(double bytes_per_s) { return fmt(bytes_per_s / 1e9) + " GB/s"; }

std::string range(const std::string& lo, const std::string& hi, const std::string& unit) {
  return lo == hi ? lo + unit : lo + unit + " .. " + hi + unit;
}

}  // namespace

TopologySummary describe_topology(const Topology& topology) {
  TopologySummary s;
  s.name = topology.name();
  s.description = topology.spec().description;
  s.num_gpus = topology.num_gpus();
  s.num_nodes = topology.num_nodes();
  s.gpus_per_node = topology.gpus_per_node();
  s.nvlink_domain_gpus = topology.nvlink_domain_gpus();
  s.num_nvlink_domains = topology.num_nvlink_domains();
  for (int32_t v = 0; v < topology.num_vertices(); ++v) {
    switch (topology.vertex_kind(v)) {
      case VertexKind::kGpu:
        break;
      case VertexKind::kNvSwitch:
        ++s.num_nvswitches;
        break;
      case VertexKind::kLeaf:
        ++s.num_leaves;
        break;
      case VertexKind::kSpine:
        ++s.num_spines;
        break;
    }
  }
  s.rail_optimized = s.num_leaves > 0 && topology.spec().rail_optimized;
  s.gpu = topology.gpu_spec();
  for (LinkClass cls : kAllLinkClasses) {
    LinkClassSummary c;
    c.link_class = cls;
    for (const Link& link : topology.links()) {
      if (link.link_class != cls) continue;
      if (c.num_links == 0) {
        c.min_capacity_bytes_per_s = c.max_capacity_bytes_per_s = link.capacity_bytes_per_s;
        c.min_latency_ns = c.max_latency_ns = link.latency_ns;
      }
      ++c.num_links;
      c.min_capacity_bytes_per_s = std::min(c.min_capacity_bytes_per_s, link.capacity_bytes_per_s);
      c.max_capacity_bytes_per_s = std::max(c.max_capacity_bytes_per_s, link.capacity_bytes_per_s);
      c.min_latency_ns = std::min(c.min_latency_ns, link.latency_ns);
      c.max_latency_ns = std::max(c.max_latency_ns, link.latency_ns);
    }
    if (c.num_links > 0) s.link_classes.push_back(c);
  }
  s.nvlink_bytes_per_s_per_gpu = topology.nvlink_bytes_per_s_per_gpu();
  s.nic_bytes_per_s_per_gpu = topology.nic_bytes_per_s_per_gpu();
  s.nvlink_line_bytes_per_s_per_gpu = topology.nvlink_line_bytes_per_s_per_gpu();
  s.nic_line_bytes_per_s_per_gpu = topology.nic_line_bytes_per_s_per_gpu();
  if (topology.num_gpus() >= 2) {
    s.bisection_bytes_per_s = bisection_bytes_per_s(topology);
    s.min_route_latency_ns = kSimTimeMax;
    for (RouteShape shape : kAllRouteShapes) {
      if (!topology.has_route_shape(shape)) continue;
      const SimTime t = topology.route_shape_latency_ns(shape);
      s.min_route_latency_ns = std::min(s.min_route_latency_ns, t);
      s.max_route_latency_ns = std::max(s.max_route_latency_ns, t);
    }
  }
  return s;
}

std::string summary_text(const TopologySummary& s) {
  std::string out = "topology " + s.name + ": " + std::to_string(s.num_gpus) +
                    " GPUs = " + std::to_string(s.num_nodes) + " nodes x " +
                    std::to_string(s.gpus_per_node) + " GPUs; " +
                    std::to_string(s.num_nvlink_domains) + " NVLink domain" +
                    (s.num_nvlink_domains == 1 ? "" : "s") + " of " +
                    std::to_string(s.nvlink_domain_gpus) + " GPUs\n";
  if (!s.description.empty()) out += "  " + s.description + "\n";
  out += "gpu " + s.gpu.name + ": peak dense";
  for (GpuDtype dtype : kAllGpuDtypes) {
    double peak = s.gpu.peak_flops_per_s(dtype);
    out += std::string(" ") + gpu_dtype_name(dtype) + " " +
           (peak > 0 ? fmt(peak / 1e12) + " TFLOP/s" : "-") + (dtype == GpuDtype::kFp4 ? "" : ",");
  }
  out += "; HBM " + fmt(static_cast<double>(s.gpu.hbm_bytes) / 1e9) + " GB at " +
         gbytes_per_s(s.gpu.hbm_bytes_per_s) + "; " + std::to_string(s.gpu.num_sms) + " SMs" +
         (s.gpu.price_usd_per_hour ? "; $" + fmt(*s.gpu.price_usd_per_hour) + " per GPU-hour (" +
                                         s.gpu.price_source + ")"
                                   : "; no price") +
         "\n";
  out +=
      "switches: " + std::to_string(s.num_nvswitches) + " nvswitch, " +
      std::to_string(s.num_leaves) + " leaf, " + std::to_string(s.num_spines) + " spine" +
      (s.num_leaves > 0 ? (s.rail_optimized ? " (rail-optimised)" : " (not rail-optimised)") : "") +
      "\n";
  out += "links (directed, one per direction):\n";
  if (s.link_classes.empty()) out += "  none\n";
  for (const LinkClassSummary& c : s.link_classes) {
    char line[160];
    std::snprintf(
        line, sizeof(line), "  %-10s %6lld  %-22s %s\n", link_class_name(c.link_class),
        static_cast<long long>(c.num_links),
        range(fmt(c.min_capacity_bytes_per_s / 1e9), fmt(c.max_capacity_bytes_per_s / 1e9), " GB/s")
            .c_str(),
        range(std::to_string(c.min_latency_ns), std::to_string(c.max_latency_ns), " ns").c_str());
    out += line;
  }
  // "160 GB/s (line rate 200 GB/s)" where an efficiency applies.
  auto rate = [&](double effective, double line) {
    return effective == line ? gbytes_per_s(effective)
                             : gbytes_per_s(effective) + " (line rate " + gbytes_per_s(line) + ")";
  };
  out += "per GPU, one direction: NVLink " +
         rate(s.nvlink_bytes_per_s_per_gpu, s.nvlink_line_bytes_per_s_per_gpu) + ", network " +
         rate(s.nic_bytes_per_s_per_gpu, s.nic_line_bytes_per_s_per_gpu) + "\n";
  out += "bisection, one direction: " + gbytes_per_s(s.bisection_bytes_per_s) + "\n";
  out +=
      "route latency: " +
      range(std::to_string(s.min_route_latency_ns), std::to_string(s.max_route_latency_ns), " ns") +
      "\n";
  return out;
}

nlohmann::json summary_json(const TopologySummary& s) {
  nlohmann::json gpu = {
      {"name", s.gpu.name},
      {"hbm_bytes", s.gpu.hbm_bytes},
      {"hbm_bytes_per_s", s.gpu.hbm_bytes_per_s},
      {"num_sms", s.gpu.num_sms},
      {"price_usd_per_hour", s.gpu.price_usd_per_hour ? nlohmann::json(*s.gpu.price_usd_per_hour)
                                                      : nlohmann::json(nullptr)},
      {"price_source",
       s.gpu.price_usd_per_hour ? nlohmann::json(s.gpu.price_source) : nlohmann::json(nullptr)}};
  for (GpuDtype dtype : kAllGpuDtypes) {
    gpu[std::string(gpu_dtype_name(dtype)) + "_flops_per_s"] = s.gpu.peak_flops_per_s(dtype);
  }
  nlohmann::json links = nlohmann::json::array();
  for (const LinkClassSummary& c : s.link_classes) {
    links.push_back({{"class", link_class_name(c.link_class)},
                     {"num_links", c.num_links},
                     {"min_capacity_bytes_per_s", c.min_capacity_bytes_per_s},
                     {"max_capacity_bytes_per_s", c.max_capacity_bytes_per_s},
                     {"min_latency_ns", c.min_latency_ns},
                     {"max_latency_ns", c.max_latency_ns}});
  }
  return {{"name", s.name},
          {"description", s.description},
          {"num_gpus", s.num_gpus},
          {"num_nodes", s.num_nodes},
          {"gpus_per_node", s.gpus_per_node},
          {"nvlink_domain_gpus", s.nvlink_domain_gpus},
          {"num_nvlink_domains", s.num_nvlink_domains},
          {"num_nvswitches", s.num_nvswitches},
          {"num_leaves", s.num_leaves},
          {"num_spines", s.num_spines},
          {"rail_optimized", s.rail_optimized},
          {"gpu", gpu},
          {"links", links},
          {"nvlink_bytes_per_s_per_gpu", s.nvlink_bytes_per_s_per_gpu},
          {"nic_bytes_per_s_per_gpu", s.nic_bytes_per_s_per_gpu},
          {"nvlink_line_bytes_per_s_per_gpu", s.nvlink_line_bytes_per_s_per_gpu},
          {"nic_line_bytes_per_s_per_gpu", s.nic_line_bytes_per_s_per_gpu},
          {"bisection_bytes_per_s", s.bisection_bytes_per_s},
          {"min_route_latency_ns", s.min_route_latency_ns},
          {"max_route_latency_ns", s.max_route_latency_ns}};
}

}  // namespace moesim::sim
