#include "sim/network/bottleneck_tables.h"

#include <algorithm>

namespace moesim::sim {

std::shared_ptr<BottleneckTables> build_bottleneck_tables(const Topology& topology) {
  auto tables = std::make_shared<BottleneckTables>();
  BottleneckTables& t = *tables;
  const auto& links = topology.links();
  t.num_links = links.size();
  t.inv_capacity_s_per_byte.resize(t.num_links + 1);
  t.capacity_bytes_per_s.resize(t.num_links);
  for (size_t l = 0; l < t.num_links; ++l) {
    t.inv_capacity_s_per_byte[l] = 1.0 / links[l].capacity_bytes_per_s;
    t.capacity_bytes_per_s[l] = links[l].capacity_bytes_per_s;
  }
  t.inv_capacity_s_per_byte[t.num_links] = 0.0;  // the dummy link never delays a flow
  return tables;
}

void build_structured_tables(const Topology& topology, size_t num_links, BottleneckWindow& t) {
  const int32_t g = t.count;
  const int32_t base = t.base;
  const auto dummy = static_cast<int32_t>(num_links);
  enum Role : uint8_t { kUnused, kFirst, kLast, kMiddle };
  std::vector<uint8_t> role(num_links, kUnused);
  auto claim = [&](int32_t link, Role r) {
    if (role[link] != kUnused && role[link] != r) return false;
    role[link] = r;
    return true;
  };
  // Per GPU, the distinct links its routes start with / continue with (as a source) and end
  // with / end with but one (as a destination), then sorted by id.
  enum Side { kSrcFirst, kSrcSecond, kDstLast, kDstBeforeLast, kNumSides };
  std::vector<std::vector<int32_t>> ends[kNumSides];
  for (auto& side : ends) side.resize(g);
  auto add = [](std::vector<int32_t>& set, int32_t link) {
    if (std::find(set.begin(), set.end(), link) == set.end()) set.push_back(link);
  };
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      if (s == d) continue;
      const Route route = topology.route(GpuId(base + s), GpuId(base + d));
      const size_t n = route.size();
      if (n < 2 || n > 4 || !claim(route.front(), kFirst) || !claim(route.back(), kLast)) return;
      if (n >= 3 && !claim(route[1], kMiddle)) return;
      if (n == 4 && !claim(route[2], kMiddle)) return;
      add(ends[kSrcFirst][s], route.front());
      add(ends[kDstLast][d], route.back());
      if (n >= 3) add(ends[kSrcSecond][s], route[1]);
      if (n == 4) add(ends[kDstBeforeLast][d], route[2]);
    }
  }
  for (auto& side : ends) {
    for (std::vector<int32_t>& set : side) {
      if (set.size() >= 0xFF) return;
      std::sort(set.begin(), set.end());
    }
  }
  // Classes by key (the four end-link indices, 0xFF where absent, and the latency index), ids in
  // first-seen order; per (GPU, class) the links on its side, in tables of stride 256 until the
  // number of classes is known.
  constexpr int32_t kMaxClasses = 0xFF;  // class 255 is "none"
  auto index_of = [](const std::vector<int32_t>& set, int32_t link) -> uint64_t {
    return static_cast<uint64_t>(std::lower_bound(set.begin(), set.end(), link) - set.begin());
  };
  std::vector<uint64_t> class_keys;
  std::vector<double> latencies_s;
  std::vector<int32_t> src_links(static_cast<size_t>(g) * 256 * 2, dummy);
  std::vector<int32_t> dst_links(static_cast<size_t>(g) * 256 * 2, dummy);
  t.pair_class.assign(static_cast<size_t>(g) * g, 0);
  t.class_latency_s.clear();
  uint64_t last_key = ~uint64_t{0};
  int32_t last_class = 0;
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      if (s == d) continue;
      const size_t pair = static_cast<size_t>(s) * g + d;
      const Route route = topology.route(GpuId(base + s), GpuId(base + d));
      const size_t n = route.size();
      const int32_t second = n >= 3 ? route[1] : dummy;
      const int32_t before_last = n == 4 ? route[2] : dummy;
      const double lat_s = to_seconds(topology.route_latency_ns(GpuId(base + s), GpuId(base + d)));
      auto lat_it = std::find(latencies_s.begin(), latencies_s.end(), lat_s);
      if (lat_it == latencies_s.end()) lat_it = latencies_s.insert(lat_it, lat_s);
      const uint64_t key = index_of(ends[kSrcFirst][s], route.front()) |
                           (n >= 3 ? index_of(ends[kSrcSecond][s], second) : 0xFF) << 8 |
                           index_of(ends[kDstLast][d], route.back()) << 16 |
                           (n == 4 ? index_of(ends[kDstBeforeLast][d], before_last) : 0xFF) << 24 |
                           static_cast<uint64_t>(lat_it - latencies_s.begin()) << 32;
      if (key != last_key) {
        auto it = std::find(class_keys.begin(), class_keys.end(), key);
        if (it == class_keys.end()) {
          if (static_cast<int32_t>(class_keys.size()) == kMaxClasses) return;
          it = class_keys.insert(it, key);
          t.class_latency_s.push_back(lat_s);
        }
        last_key = key;
        last_class = static_cast<int32_t>(it - class_keys.begin());
      }
      t.pair_class[pair] = static_cast<uint8_t>(last_class);
      int32_t* src = &src_links[(static_cast<size_t>(s) * 256 + last_class) * 2];
      int32_t* dst = &dst_links[(static_cast<size_t>(d) * 256 + last_class) * 2];
      src[0] = route.front();
      src[1] = second;
      dst[0] = route.back();
      dst[1] = before_last;
    }
  }
  t.num_classes = static_cast<int32_t>(class_keys.size());
  const size_t cc = static_cast<size_t>(t.num_classes) + 1;
  for (int32_t i = 0; i < g; ++i) t.pair_class[static_cast<size_t>(i) * g + i] = t.num_classes;
  t.src_links.assign(static_cast<size_t>(g) * cc * 2, dummy);
  t.dst_links.assign(static_cast<size_t>(g) * cc * 2, dummy);
  for (size_t gpu = 0; gpu < static_cast<size_t>(g); ++gpu) {
    std::copy_n(&src_links[gpu * 256 * 2], t.num_classes * 2, &t.src_links[gpu * cc * 2]);
    std::copy_n(&dst_links[gpu * 256 * 2], t.num_classes * 2, &t.dst_links[gpu * cc * 2]);
  }
  t.class_latency_s.push_back(0.0);  // "none": never read for a flow
  t.structured = true;
}

}  // namespace moesim::sim
