// The bottleneck model's tables (bottleneck_model.h describes the structured path that reads
// them): per-link capacities, and per window of consecutive participants the route class of every
// pair and the route-end links of every (GPU, class). Built once and shared, read-only, by every
// model of one topology.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "sim/topology/topology.h"

namespace moesim::sim {

// What the structured path derives for one window of consecutive GpuIds [base, base + count):
// the route classes of its pairs. Read-only once built.
struct BottleneckWindow {
  int32_t base = 0;
  int32_t count = 0;
  bool structured = false;
  int32_t num_classes = 0;  // C; class C ("none") marks the diagonal and pairs without a flow
  // pair_class[i * count + j]: the route class of the pair (base + i, base + j), C on the
  // diagonal.
  std::vector<uint8_t> pair_class;
  // src_links[(i * (C + 1) + class) * 2 + k]: the first (k = 0) and second (k = 1) link of the
  // class's routes from GPU base + i; dst_links: the last and second-to-last links of its routes
  // into base + i. The dummy link where a route has no such link or the class is unused there.
  std::vector<int32_t> src_links;
  std::vector<int32_t> dst_links;
  std::vector<double> class_latency_s;  // [class]
};

// What every model of one topology shares: per-link capacities, and the windows built so far
// (guarded: models of one topology may run on several threads).
struct BottleneckTables {
  size_t num_links = 0;                         // link id num_links is the dummy padding link
  std::vector<double> inv_capacity_s_per_byte;  // [link], 0 for the dummy
  std::vector<double> capacity_bytes_per_s;     // [link]
  std::mutex mutex;
  std::vector<std::shared_ptr<const BottleneckWindow>> windows;
};

// The per-link tables of `topology`, with no window yet.
std::shared_ptr<BottleneckTables> build_bottleneck_tables(const Topology& topology);

// Fills `window` (base and count set) with the route classes of its pairs when the routes
// between its GPUs have the structured shape (bottleneck_model.h); leaves window.structured
// false otherwise. `num_links`: the topology's links (link id num_links is the dummy).
void build_structured_tables(const Topology& topology, size_t num_links, BottleneckWindow& window);

}  // namespace moesim::sim
