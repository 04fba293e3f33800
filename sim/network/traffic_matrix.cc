#include "sim/network/traffic_matrix.h"

#include <algorithm>

#include "sim/core/check.h"

namespace moesim::sim {

void TrafficMatrix::reset(std::span<const GpuId> gpus) {
  gpus_.assign(gpus.begin(), gpus.end());
  bytes_.assign(gpus_.size() * gpus_.size(), 0.0);
}

void TrafficMatrix::reset_uninitialized(std::span<const GpuId> gpus) {
  gpus_.assign(gpus.begin(), gpus.end());
  bytes_.resize(gpus_.size() * gpus_.size());
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
  // sum over s of sent_bytes(s), each row summed in column order: the same additions as the
  // obvious loop, four rows at a time so that their dependency chains overlap.
  const int32_t p = size();
  double sum = 0;
  int32_t s = 0;
  for (; s + 4 <= p; s += 4) {
    const double* r0 = &bytes_[flat(s, 0)];
    const double* r1 = r0 + p;
    const double* r2 = r1 + p;
    const double* r3 = r2 + p;
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int32_t d = 0; d < p; ++d) {
      a0 += d != s ? r0[d] : 0.0;
      a1 += d != s + 1 ? r1[d] : 0.0;
      a2 += d != s + 2 ? r2[d] : 0.0;
      a3 += d != s + 3 ? r3[d] : 0.0;
    }
    sum += a0;
    sum += a1;
    sum += a2;
    sum += a3;
  }
  for (; s < p; ++s) sum += sent_bytes(s);
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
template <Direction dir>
inline void add(TrafficMatrix& out, int32_t from_idx, int32_t to_idx, double bytes) {
  if constexpr (dir == Direction::kDispatch) {
    out.add_bytes(from_idx, to_idx, bytes);
  } else {
    out.add_bytes(to_idx, from_idx, bytes);
  }
}

// Every (s, d) entry is written exactly once (0 + x == x), so no zero fill is needed first.
template <Direction dir>
void build_direct(const TokenCounts& counts, double bytes_per_token, TrafficMatrix& out) {
  const int32_t p = counts.size();
  for (int32_t s = 0; s < p; ++s) {
    const int64_t* row = &counts.tokens[static_cast<size_t>(s) * p];
    for (int32_t d = 0; d < p; ++d) {
      const double bytes = row[d] > 0 ? static_cast<double>(row[d]) * bytes_per_token : 0.0;
      if constexpr (dir == Direction::kDispatch) {
        out.set_bytes(s, d, bytes);
      } else {
        out.set_bytes(d, s, bytes);
      }
    }
  }
}

// Hierarchical dispatch when the participants are whole nodes of consecutive GpuIds (the usual
// EP group): node-by-node without lookup tables. For one source every addition goes to a
// distinct entry, and sources are visited in order, so every entry receives the same additions
// in the same order as in build_hierarchical_general().
template <Direction dir>
void build_hierarchical_whole_nodes(const Topology& topology, const TokenCounts& counts,
                                    double bytes_per_token, TrafficMatrix& out) {
  const int32_t p = counts.size();
  const int32_t gpn = topology.gpus_per_node();
  const int32_t first_node = counts.gpus[0].value / gpn;
  const int32_t num_local_nodes = p / gpn;
  const int32_t num_nodes = topology.num_nodes();
  for (int32_t s = 0; s < p; ++s) {
    const int32_t src_local_node = s / gpn;
    const int32_t src_rail = s % gpn;
    const int64_t* row = &counts.tokens[static_cast<size_t>(s) * p];
    const int64_t tokens_per_src = counts.tokens_per_src[s];
    const double tokens_src = static_cast<double>(tokens_per_src);
    for (int32_t n = 0; n < num_local_nodes; ++n) {
      const int32_t first = n * gpn;
      if (n == src_local_node) {
        for (int32_t d = first; d < first + gpn; ++d) {
          if (row[d] > 0) add<dir>(out, s, d, static_cast<double>(row[d]) * bytes_per_token);
        }
        continue;
      }
      const int32_t relay = first + src_rail;
      double not_reached = 1.0;  // prod over d in node of (1 - tokens / T)
      bool has_dst = false;
      for (int32_t d = first; d < first + gpn; ++d) {
        const int64_t n_tokens = row[d];
        if (n_tokens <= 0) continue;
        MOESIM_CHECK(n_tokens <= tokens_per_src, "tokens(s, d) exceeds tokens_per_src(s)");
        has_dst = true;
        not_reached *= 1.0 - static_cast<double>(n_tokens) / tokens_src;
        if (relay != d) add<dir>(out, relay, d, static_cast<double>(n_tokens) * bytes_per_token);
      }
      if (!has_dst) continue;
      const double unique_tokens =
          counts.unique_node_tokens.empty()
              ? tokens_src * (1.0 - not_reached)
              : static_cast<double>(
                    counts.unique_node_tokens[static_cast<size_t>(s) * num_nodes + first_node + n]);
      add<dir>(out, s, relay, unique_tokens * bytes_per_token);
    }
  }
}

template <Direction dir>
void build_hierarchical_general(const Topology& topology, const TokenCounts& counts,
                                double bytes_per_token, TrafficMatrix& out) {
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
        add<dir>(out, s, d, static_cast<double>(n) * bytes_per_token);
        continue;
      }
      MOESIM_CHECK(n <= counts.tokens_per_src[s], "tokens(s, d) exceeds tokens_per_src(s)");
      has_dst[dst_node] = 1;
      not_reached[dst_node] *= 1.0 - static_cast<double>(n) / tokens_src;
      const int32_t relay = idx_at[dst_node * topology.gpus_per_node() + src_rail];
      MOESIM_CHECK(relay >= 0, "hierarchical: the relay GPU is not a participant");
      if (relay != d) add<dir>(out, relay, d, static_cast<double>(n) * bytes_per_token);
    }
    for (int32_t node = 0; node < num_nodes; ++node) {
      if (!has_dst[node]) continue;
      const double unique_tokens =
          counts.unique_node_tokens.empty()
              ? tokens_src * (1.0 - not_reached[node])
              : static_cast<double>(
                    counts.unique_node_tokens[static_cast<size_t>(s) * num_nodes + node]);
      const int32_t relay = idx_at[node * topology.gpus_per_node() + src_rail];
      add<dir>(out, s, relay, unique_tokens * bytes_per_token);
    }
  }
}

// Whether the participants are whole nodes of consecutive GpuIds in order.
bool whole_consecutive_nodes(const Topology& topology, const TokenCounts& counts) {
  const int32_t p = counts.size();
  const int32_t gpn = topology.gpus_per_node();
  if (p == 0 || p % gpn != 0 || counts.gpus[0].value % gpn != 0) return false;
  for (int32_t i = 1; i < p; ++i) {
    if (counts.gpus[i].value != counts.gpus[0].value + i) return false;
  }
  return true;
}

template <Direction dir>
void build(const Topology& topology, const TokenCounts& counts, double bytes_per_token,
           DispatchAlgorithm algorithm, TrafficMatrix& out) {
  check_counts(counts, topology);
  MOESIM_CHECK(bytes_per_token >= 0, "bytes per token must be non-negative");
  if (algorithm == DispatchAlgorithm::kDirect) {
    out.reset_uninitialized(counts.gpus);
    build_direct<dir>(counts, bytes_per_token, out);
    return;
  }
  out.reset(counts.gpus);
  if (whole_consecutive_nodes(topology, counts)) {
    build_hierarchical_whole_nodes<dir>(topology, counts, bytes_per_token, out);
  } else {
    build_hierarchical_general<dir>(topology, counts, bytes_per_token, out);
  }
}

}  // namespace

void build_dispatch_traffic(const Topology& topology, const TokenCounts& counts,
                            double bytes_per_token, DispatchAlgorithm algorithm,
                            TrafficMatrix& out) {
  build<Direction::kDispatch>(topology, counts, bytes_per_token, algorithm, out);
}

void build_combine_traffic(const Topology& topology, const TokenCounts& counts,
                           double bytes_per_token, DispatchAlgorithm algorithm,
                           TrafficMatrix& out) {
  build<Direction::kCombine>(topology, counts, bytes_per_token, algorithm, out);
}

}  // namespace moesim::sim
