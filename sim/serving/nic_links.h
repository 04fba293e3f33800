// Host-link contention (docs/serving.md, "Tiered KV cache"): the tiered KV cache's copies share a
// GPU's PCIe link with its NIC traffic, so the step model slows each GPU's NIC link by a factor
// for the step and reports the all-to-all bytes that crossed each NIC. NicLinks finds the
// replica GPUs' NIC links once and translates between per-GPU and per-link figures.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/ids.h"
#include "sim/network/network_model.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

class NicLinks {
 public:
  NicLinks(const Topology& topology, std::span<const GpuId> gpus);

  // Per-link factors for the network model from per-GPU factors >= 1 by which the time per byte
  // of each GPU's NIC link in / out grows (empty spans: none); empty when both are.
  const std::vector<double>& link_slowdown(std::span<const double> in, std::span<const double> out);
  // Adds the bytes the network model's last collective put on each GPU's NIC link
  // (NetworkModel::link_bytes, checked to be reported) to `in` / `out` (per replica GPU).
  void add_link_bytes(const NetworkModel& network, std::span<double> in,
                      std::span<double> out) const;

 private:
  const Topology& topology_;
  std::vector<int32_t> in_link_, out_link_;  // per replica GPU, -1 without a NIC
  std::vector<double> link_slowdown_;        // per link id
};

}  // namespace moesim::sim
