#include "sim/calibration/network_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "sim/config/config_error.h"
#include "sim/network/rdma_only_topology.h"
#include "sim/network/network_model.h"
#include "sim/network/traffic_matrix.h"

namespace moesim::sim {
namespace {

// Every latency zero; without_latencies() also at line rate (efficiencies 1), the figures the fit
// measures efficiencies against.
TopologySpec zero_latencies(TopologySpec spec) {
  spec.nvlink_latency_ns = 0;
  spec.nvswitch_latency_ns = 0;
  spec.nic_latency_ns = 0;
  spec.leaf_spine_latency_ns = 0;
  spec.switch_latency_ns = 0;
  return spec;
}

TopologySpec without_latencies(TopologySpec spec) {
  spec.nvlink_efficiency = 1.0;
  spec.network_efficiency = 1.0;
  return zero_latencies(spec);
}

NominalCollective run_uniform(const Topology& topology, NetworkModel& model, int32_t ep_size,
                              double bytes_per_gpu) {
  std::vector<GpuId> gpus;
  for (int32_t g = 0; g < ep_size; ++g) gpus.emplace_back(g);
  TrafficMatrix traffic(gpus);
  const double pair_bytes = bytes_per_gpu / static_cast<double>(ep_size - 1);
  for (int32_t s = 0; s < ep_size; ++s) {
    for (int32_t d = 0; d < ep_size; ++d) {
      if (s != d) traffic.set_bytes(s, d, pair_bytes);
    }
  }
  CollectiveResult r;
  model.run(traffic, r);
  return {to_seconds(r.duration_ns), calibration_link_class(r.bottleneck_class)};
}

}  // namespace

NominalCollective nominal_collective(const Topology& topology, int32_t ep_size,
                                     double bytes_per_gpu) {
  const Topology zero(without_latencies(topology.spec()));
  auto model = NetworkModelRegistry().make("bottleneck", zero);
  return run_uniform(zero, *model, ep_size, bytes_per_gpu);
}

namespace {

// The samples by what they fit: per link class (nominal transfer time on the zero-latency,
// line-rate topology in the FLOP column) and per kernel/transport (nominal time set later).
struct GroupedSamples {
  std::map<std::string, std::vector<size_t>> by_class;
  std::map<std::string, std::vector<size_t>> by_kernel;  // "kernel/transport"
  std::vector<FitSample> fit_samples;                    // one per sample
};

// Checks every sample against `topology` (ConfigError naming the sample), groups them and adds
// one report row each.
GroupedSamples group_samples(const std::vector<CollectiveSample>& samples, const Topology& topology,
                             NetworkFitReport& report) {
  const Topology zero(without_latencies(topology.spec()));
  auto model = NetworkModelRegistry().make("bottleneck", zero);
  GroupedSamples g;
  for (size_t i = 0; i < samples.size(); ++i) {
    const CollectiveSample& s = samples[i];
    const std::string where = s.source + " sample " + std::to_string(i + 1);
    if (s.ep_size < 2 || s.ep_size > topology.num_gpus()) {
      throw ConfigError(where, 0, 0, "collective.ep_size",
                        std::to_string(s.ep_size) + " GPUs do not fit topology " + topology.name() +
                            " (" + std::to_string(topology.num_gpus()) +
                            " GPUs; at least 2 are needed)");
    }
    if (!(s.bytes_per_gpu > 0)) {
      throw ConfigError(where, 0, 0, "collective.bytes_per_gpu", "must be > 0");
    }
    if (!(s.measured_s > 0)) throw ConfigError(where, 0, 0, "collective.measured", "must be > 0");
    if (!s.kernel.empty()) {
      if (s.kernel != kLowLatencyDispatchKernel && s.kernel != kLowLatencyCombineKernel) {
        throw ConfigError(where, 0, 0, "collective.kernel",
                          "unknown kernel '" + s.kernel + "' (valid: " + kLowLatencyDispatchKernel +
                              ", " + kLowLatencyCombineKernel + ")");
      }
      g.fit_samples.push_back({0.0, 0.0, s.bytes_per_gpu, s.measured_s});
      report.rows.push_back({s.kernel, 0.0, 0.0, s.measured_s});
      g.by_kernel[s.kernel + (s.rdma ? "/rdma" : "/nvlink")].push_back(i);
      continue;
    }
    const NominalCollective n = run_uniform(zero, *model, s.ep_size, s.bytes_per_gpu);
    // The nominal transfer time stands in the FLOP column of the one-feature fit.
    g.fit_samples.push_back({n.transfer_s, 0.0, s.bytes_per_gpu, s.measured_s});
    report.rows.push_back({n.link_class, n.transfer_s, 0.0, s.measured_s});
    g.by_class[n.link_class].push_back(i);
  }
  return g;
}

// Efficiency and latency per link class (report.calibration.link_classes), one regime each.
void fit_link_classes(const std::vector<CollectiveSample>& samples, const GroupedSamples& g,
                      int32_t min_samples, NetworkFitReport& report) {
  FitOptions one_regime;
  one_regime.max_segments = 1;
  for (const char* cls : {"nvlink", "network"}) {
    auto it = g.by_class.find(cls);
    if (it == g.by_class.end()) continue;
    std::vector<FitSample> mine;
    for (size_t i : it->second) mine.push_back(g.fit_samples[i]);
    if (static_cast<int32_t>(mine.size()) < min_samples) {
      report.skipped.push_back(std::string(cls) + ": " + std::to_string(mine.size()) +
                               " samples (< " + std::to_string(min_samples) + ")");
      continue;
    }
    const OpFit fit = fit_op(mine, {FitFeature::kFlops}, one_regime);
    const FitSegment& seg = fit.segments.front();
    if (!(seg.s_per_flop > 0)) {
      report.skipped.push_back(std::string(cls) +
                               ": time does not grow with bytes (no efficiency to fit)");
      continue;
    }
    LinkClassFit f;
    f.link_class = cls;
    f.efficiency = 1.0 / seg.s_per_flop;
    f.latency_s = seg.intercept_s;
    f.bytes_per_gpu_min = fit.range.tokens_min;
    f.bytes_per_gpu_max = fit.range.tokens_max;
    f.ep_size_min = samples[it->second.front()].ep_size;
    f.ep_size_max = f.ep_size_min;
    for (size_t i : it->second) {
      f.ep_size_min = std::min(f.ep_size_min, samples[i].ep_size);
      f.ep_size_max = std::max(f.ep_size_max, samples[i].ep_size);
      report.rows[i].predicted_s = f.latency_s + g.fit_samples[i].flops / f.efficiency;
    }
    f.quality = fit.quality;
    report.calibration.link_classes.push_back(f);
  }
}

// measured = fixed + x (x the nominal time in the FLOP column), least squares on relative error:
// minimising sum ((fixed + x_i) / m_i - 1)^2 gives fixed = sum (m_i - x_i) / m_i^2 / sum 1 / m_i^2,
// clamped at 0 (a kernel is never faster than its traffic). The law with the samples' ranges.
OpFit fixed_cost_law(const std::vector<FitSample>& mine) {
  double num = 0, den = 0;
  for (const FitSample& f : mine) {
    num += (f.seconds - f.flops) / (f.seconds * f.seconds);
    den += 1.0 / (f.seconds * f.seconds);
  }
  OpFit law;
  law.features = {FitFeature::kFlops};
  law.segments.resize(1);
  law.segments[0].intercept_s = std::max(0.0, num / den);
  law.segments[0].s_per_flop = 1.0;
  law.range.flops_min = law.range.flops_max = mine.front().flops;
  law.range.tokens_min = law.range.tokens_max = mine.front().tokens;
  for (const FitSample& f : mine) {
    law.range.flops_min = std::min(law.range.flops_min, f.flops);
    law.range.flops_max = std::max(law.range.flops_max, f.flops);
    law.range.tokens_min = std::min(law.range.tokens_min, f.tokens);
    law.range.tokens_max = std::max(law.range.tokens_max, f.tokens);
  }
  return law;
}

// Fixed cost per low-latency kernel and transport (report.calibration.kernels), over the
// nominal time on the calibrated topology (the link classes fitted so far applied, every latency
// zero; RDMA samples on a topology where every GPU is its own node).
void fit_kernels(const std::vector<CollectiveSample>& samples, const Topology& topology,
                 GroupedSamples& g, int32_t min_samples, NetworkFitReport& report) {
  const Topology calibrated(
      zero_latencies(apply_network_calibration(topology.spec(), report.calibration)));
  auto calibrated_model = NetworkModelRegistry().make("bottleneck", calibrated);
  // Pure-RDMA samples: every GPU its own node (made on the first such sample).
  std::optional<Topology> rdma;
  std::unique_ptr<NetworkModel> rdma_model;
  for (const char* kernel : {kLowLatencyDispatchKernel, kLowLatencyCombineKernel}) {
    for (const char* transport : {"nvlink", "rdma"}) {
      const bool is_rdma = std::string_view(transport) == "rdma";
      auto it = g.by_kernel.find(std::string(kernel) + "/" + transport);
      if (it == g.by_kernel.end()) continue;
      const std::string name = std::string(kernel) + " over " + transport;
      std::vector<FitSample> mine;
      for (size_t i : it->second) {
        const CollectiveSample& s = samples[i];
        if (is_rdma && !rdma) {
          if (!(calibrated.nic_bytes_per_s_per_gpu() > 0)) {
            throw ConfigError(s.source + " sample " + std::to_string(i + 1), 0, 0,
                              "collective.transport",
                              "rdma needs a network: topology " + topology.name() + " has no NICs");
          }
          rdma.emplace(rdma_only_spec(calibrated.spec()));
          rdma_model = NetworkModelRegistry().make("bottleneck", *rdma);
        }
        const NominalCollective n =
            is_rdma ? run_uniform(*rdma, *rdma_model, s.ep_size, s.bytes_per_gpu)
                    : run_uniform(calibrated, *calibrated_model, s.ep_size, s.bytes_per_gpu);
        g.fit_samples[i].flops = n.transfer_s;
        report.rows[i].nominal_s = n.transfer_s;
        mine.push_back(g.fit_samples[i]);
      }
      if (static_cast<int32_t>(mine.size()) < min_samples) {
        report.skipped.push_back(name + ": " + std::to_string(mine.size()) + " samples (< " +
                                 std::to_string(min_samples) + ")");
        continue;
      }
      const OpFit law = fixed_cost_law(mine);
      KernelFit k;
      k.kernel = kernel;
      k.transport = transport;
      k.fixed_s = law.segments[0].intercept_s;
      k.ep_size_min = samples[it->second.front()].ep_size;
      k.ep_size_max = k.ep_size_min;
      for (size_t i : it->second) {
        k.ep_size_min = std::min(k.ep_size_min, samples[i].ep_size);
        k.ep_size_max = std::max(k.ep_size_max, samples[i].ep_size);
        report.rows[i].predicted_s = k.fixed_s + g.fit_samples[i].flops;
      }
      k.quality = evaluate_fit(law, mine);
      report.calibration.kernels.push_back(k);
    }
  }
}

}  // namespace

NetworkFitReport fit_network(const std::vector<CollectiveSample>& samples, const Topology& topology,
                             int32_t min_samples) {
  NetworkFitReport report;
  report.calibration.topology = topology.name();
  GroupedSamples g = group_samples(samples, topology, report);
  fit_link_classes(samples, g, min_samples, report);
  if (!g.by_kernel.empty()) fit_kernels(samples, topology, g, min_samples, report);
  return report;
}

}  // namespace moesim::sim
