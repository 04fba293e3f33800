#include "sim/network/traffic_matrix.h"

#include <algorithm>

#include "sim/core/check.h"

namespace moesim::sim {

void TrafficMatrix::reset(std::span<const GpuId> gpus) {
  gpus_.assign(gpus.begin(), gpus.end());
  bytes_.assign(gpus_.size() * gpus_.size(), 0.0);
}

void TrafficMatrix::fill_zero() { std::fill(bytes_.begin(), bytes_.end(), 0.0); }

double TrafficMatrix::sent_bytes(int32_t idx) const {
  double sum = 0;
  for (int32_t d = 0; d < size(); ++d) {
    if (d != idx) sum += bytes(idx, d);
  }
  return sum;
}

double TrafficMatrix::received_bytes(int32_t idx) const {
  double sum = 0;
  for (int32_t s = 0; s < size(); ++s) {
    if (s != idx) sum += bytes(s, idx);
  }
  return sum;
}

double TrafficMatrix::total_bytes() const {
  double sum = 0;
  for (int32_t s = 0; s < size(); ++s) sum += sent_bytes(s);
  return sum;
}

const char* dispatch_algorithm_name(DispatchAlgorithm algorithm) {
  switch (algorithm) {
    case DispatchAlgorithm::kDirect:
      return "direct";
    case DispatchAlgorithm::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

std::optional<DispatchAlgorithm> parse_dispatch_algorithm(std::string_view name) {
  if (name == "direct") return DispatchAlgorithm::kDirect;
  if (name == "hierarchical") return DispatchAlgorithm::kHierarchical;
  return std::nullopt;
}

const char* wire_dtype_name(WireDtype dtype) {
  switch (dtype) {
    case WireDtype::kBf16:
      return "bf16";
    case WireDtype::kFp8:
      return "fp8";
  }
  return "?";
}

std::optional<WireDtype> parse_wire_dtype(std::string_view name) {
  if (name == "bf16") return WireDtype::kBf16;
  if (name == "fp8") return WireDtype::kFp8;
  return std::nullopt;
}

double token_bytes(int64_t hidden, WireDtype dtype) {
  MOESIM_CHECK(hidden > 0, "hidden size must be positive");
  switch (dtype) {
    case WireDtype::kBf16:
      return 2.0 * static_cast<double>(hidden);
    case WireDtype::kFp8:
      return static_cast<double>(hidden) + 4.0 * static_cast<double>((hidden + 127) / 128);
  }
  return 0;
}

namespace {

enum class Direction { kDispatch, kCombine };

void check_counts(const TokenCounts& counts, const Topology& topology) {
  const size_t p = counts.gpus.size();
  MOESIM_CHECK(counts.tokens.size() == p * p, "tokens must be P x P");
  MOESIM_CHECK(counts.tokens_per_src.size() == p, "tokens_per_src must have P entries");
  MOESIM_CHECK(
      counts.unique_node_tokens.empty() ||
          counts.unique_node_tokens.size() == p * static_cast<size_t>(topology.num_nodes()),
      "unique_node_tokens must be P x num_nodes");
  for (GpuId g : counts.gpus) {
    MOESIM_CHECK(g.value >= 0 && g.value < topology.num_gpus(), "participant outside topology");
  }
}

// Adds `bytes` to out in the direction of the collective: dispatch moves data from -> to,
// combine moves it back (to -> from).
inline void add(TrafficMatrix& out, Direction dir, int32_t from_idx, int32_t to_idx, double bytes) {
  if (dir == Direction::kDispatch) {
    out.add_bytes(from_idx, to_idx, bytes);
  } else {
    out.add_bytes(to_idx, from_idx, bytes);
  }
}

void build_direct(const TokenCounts& counts, double bytes_per_token, Direction dir,
                  TrafficMatrix& out) {
  const int32_t p = counts.size();
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t d = 0; d < p; ++d) {
      const int64_t n = counts.at(s, d);
      if (n > 0) add(out, dir, s, d, static_cast<double>(n) * bytes_per_token);
    }
  }
}

void build_hierarchical(const Topology& topology, const TokenCounts& counts, double bytes_per_token,
                        Direction dir, TrafficMatrix& out) {
  const int32_t p = counts.size();
  const int32_t num_nodes = topology.num_nodes();
  // Participant index of the GPU at (node, rail), or -1.
  std::vector<int32_t> idx_at(static_cast<size_t>(topology.num_gpus()), -1);
  for (int32_t i = 0; i < p; ++i) idx_at[counts.gpus[i].value] = i;
  std::vector<double> not_reached(num_nodes);  // prod over d in node of (1 - tokens / T)
  std::vector<uint8_t> has_dst(num_nodes);
  for (int32_t s = 0; s < p; ++s) {
    const GpuId src = counts.gpus[s];
    const int32_t src_node = topology.node_of(src).value;
    const int32_t src_rail = topology.rail_of(src);
    const double tokens_src = static_cast<double>(counts.tokens_per_src[s]);
    std::fill(not_reached.begin(), not_reached.end(), 1.0);
    std::fill(has_dst.begin(), has_dst.end(), 0);
    for (int32_t d = 0; d < p; ++d) {
      const int64_t n = counts.at(s, d);
      if (n <= 0) continue;
      const int32_t dst_node = topology.node_of(counts.gpus[d]).value;
      if (dst_node == src_node) {
        add(out, dir, s, d, static_cast<double>(n) * bytes_per_token);
        continue;
      }
      MOESIM_CHECK(n <= counts.tokens_per_src[s], "tokens(s, d) exceeds tokens_per_src(s)");
      has_dst[dst_node] = 1;
      not_reached[dst_node] *= 1.0 - static_cast<double>(n) / tokens_src;
      const int32_t relay = idx_at[dst_node * topology.gpus_per_node() + src_rail];
      MOESIM_CHECK(relay >= 0, "hierarchical: the relay GPU is not a participant");
      if (relay != d) add(out, dir, relay, d, static_cast<double>(n) * bytes_per_token);
    }
    for (int32_t node = 0; node < num_nodes; ++node) {
      if (!has_dst[node]) continue;
      const double unique_tokens =
          counts.unique_node_tokens.empty()
              ? tokens_src * (1.0 - not_reached[node])
              : static_cast<double>(
                    counts.unique_node_tokens[static_cast<size_t>(s) * num_nodes + node]);
      const int32_t relay = idx_at[node * topology.gpus_per_node() + src_rail];
      add(out, dir, s, relay, unique_tokens * bytes_per_token);
    }
  }
}

void build(const Topology& topology, const TokenCounts& counts, double bytes_per_token,
           DispatchAlgorithm algorithm, Direction dir, TrafficMatrix& out) {
  check_counts(counts, topology);
  MOESIM_CHECK(bytes_per_token >= 0, "bytes per token must be non-negative");
  out.reset(counts.gpus);
  if (algorithm == DispatchAlgorithm::kDirect) {
    build_direct(counts, bytes_per_token, dir, out);
  } else {
    build_hierarchical(topology, counts, bytes_per_token, dir, out);
  }
}

}  // namespace

void build_dispatch_traffic(const Topology& topology, const TokenCounts& counts,
                            double bytes_per_token, DispatchAlgorithm algorithm,
                            TrafficMatrix& out) {
  build(topology, counts, bytes_per_token, algorithm, Direction::kDispatch, out);
}

void build_combine_traffic(const Topology& topology, const TokenCounts& counts,
                           double bytes_per_token, DispatchAlgorithm algorithm,
                           TrafficMatrix& out) {
  build(topology, counts, bytes_per_token, algorithm, Direction::kCombine, out);
}

}  // namespace moesim::sim
