// All-to-all traffic patterns for the network tests: uniform, one hot destination GPU, and
// Zipf-distributed per-pair sizes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/core/rng.h"
#include "sim/network/traffic_matrix.h"

namespace moesim::sim::testing {

inline std::vector<GpuId> first_n_gpus(int32_t n) {
  std::vector<GpuId> gpus;
  for (int32_t i = 0; i < n; ++i) gpus.push_back(GpuId(i));
  return gpus;
}

// Every ordered pair of distinct GPUs moves `bytes`.
inline TrafficMatrix uniform_all_to_all(int32_t n, double bytes) {
  TrafficMatrix m(first_n_gpus(n));
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t d = 0; d < n; ++d) {
      if (s != d) m.set_bytes(s, d, bytes);
    }
  }
  return m;
}

// Uniform `bytes` per pair, except that every flow into `hot_idx` carries `hot_factor` x bytes.
inline TrafficMatrix hot_destination(int32_t n, double bytes, int32_t hot_idx, double hot_factor) {
  TrafficMatrix m = uniform_all_to_all(n, bytes);
  for (int32_t s = 0; s < n; ++s) {
    if (s != hot_idx) m.set_bytes(s, hot_idx, bytes * hot_factor);
  }
  return m;
}

// Per-pair sizes mean_bytes x w / mean(w) with w = 1 / rank^s for a random rank of each pair.
inline TrafficMatrix zipf_pairs(int32_t n, double mean_bytes, double s, uint64_t seed) {
  RngStream rng(seed, "zipf_pairs");
  const int32_t num_pairs = n * (n - 1);
  std::vector<int32_t> ranks(num_pairs);
  for (int32_t i = 0; i < num_pairs; ++i) ranks[i] = i + 1;
  for (int32_t i = num_pairs - 1; i > 0; --i) {
    std::swap(ranks[i], ranks[rng.uniform_int(static_cast<uint64_t>(i) + 1)]);
  }
  double sum_w = 0;
  for (int32_t r : ranks) sum_w += std::pow(r, -s);
  TrafficMatrix m(first_n_gpus(n));
  int32_t k = 0;
  for (int32_t src = 0; src < n; ++src) {
    for (int32_t dst = 0; dst < n; ++dst) {
      if (src == dst) continue;
      m.set_bytes(src, dst, std::round(mean_bytes * num_pairs * std::pow(ranks[k++], -s) / sum_w));
    }
  }
  return m;
}

}  // namespace moesim::sim::testing
