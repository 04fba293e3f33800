#include "sim/network/traffic_matrix.h"

#include <algorithm>

#include "base/check.h"
#include "sim/network/hierarchical_traffic.h"

namespace moesim::sim {

void TrafficMatrix::reset(std::span<const GpuId> gpus) {
  has_support_ = false;
  gpus_.assign(gpus.begin(), gpus.end());
  bytes_.assign(gpus_.size() * gpus_.size(), 0.0);
}

void TrafficMatrix::reset_uninitialized(std::span<const GpuId> gpus) {
  has_support_ = false;
  gpus_.assign(gpus.begin(), gpus.end());
  bytes_.resize(gpus_.size() * gpus_.size());
}

void TrafficMatrix::fill_zero() {
  has_support_ = false;
  std::fill(bytes_.begin(), bytes_.end(), 0.0);
}

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
  if (has_support_) {
    // The same sums without the +0.0 entries outside the support (see the file comment); four
    // rows at a time where their supports have equal sizes.
    auto row_sum = [&](int32_t src) {
      const double* row = &bytes_[flat(src, 0)];
      double a = 0;
      for (const int32_t d : support(src)) a += d != src ? row[d] : 0.0;
      return a;
    };
    int32_t src = 0;
    for (; src + 4 <= p; src += 4) {
      const int32_t* begin = &support_begin_[src];
      const int32_t n = begin[1] - begin[0];
      if (begin[2] - begin[1] != n || begin[3] - begin[2] != n || begin[4] - begin[3] != n) {
        for (int32_t i = 0; i < 4; ++i) sum += row_sum(src + i);
        continue;
      }
      const double* r0 = &bytes_[flat(src, 0)];
      const double* r1 = r0 + p;
      const double* r2 = r1 + p;
      const double* r3 = r2 + p;
      const int32_t* c0 = &support_cols_[begin[0]];
      const int32_t* c1 = c0 + n;
      const int32_t* c2 = c1 + n;
      const int32_t* c3 = c2 + n;
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (int32_t j = 0; j < n; ++j) {
        a0 += c0[j] != src ? r0[c0[j]] : 0.0;
        a1 += c1[j] != src + 1 ? r1[c1[j]] : 0.0;
        a2 += c2[j] != src + 2 ? r2[c2[j]] : 0.0;
        a3 += c3[j] != src + 3 ? r3[c3[j]] : 0.0;
      }
      sum += a0;
      sum += a1;
      sum += a2;
      sum += a3;
    }
    for (; src < p; ++src) sum += row_sum(src);
    return sum;
  }
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
    case DispatchAlgorithm::kLowLatency:
      return "low_latency";
  }
  return "?";
}

std::optional<DispatchAlgorithm> parse_dispatch_algorithm(std::string_view name) {
  if (name == "direct") return DispatchAlgorithm::kDirect;
  if (name == "hierarchical") return DispatchAlgorithm::kHierarchical;
  if (name == "low_latency") return DispatchAlgorithm::kLowLatency;
  return std::nullopt;
}

const char* low_latency_transport_name(LowLatencyTransport transport) {
  return transport == LowLatencyTransport::kRdma ? "rdma" : "nvlink";
}

std::optional<LowLatencyTransport> parse_low_latency_transport(std::string_view name) {
  if (name == "nvlink") return LowLatencyTransport::kNvlink;
  if (name == "rdma") return LowLatencyTransport::kRdma;
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

void check_token_counts(const TokenCounts& counts, const Topology& topology) {
  const size_t p = counts.gpus.size();
  MOESIM_CHECK(counts.tokens.size() == p * p, "tokens must be P x P");
  MOESIM_CHECK(counts.tokens_per_src.size() == p, "tokens_per_src must have P entries");
  MOESIM_CHECK(
      counts.unique_node_tokens.empty() ||
          counts.unique_node_tokens.size() == p * static_cast<size_t>(topology.num_nodes()),
      "unique_node_tokens must be P x num_nodes");
  MOESIM_CHECK(
      counts.node_limit.empty() ||
          (counts.node_limit.open_fraction.size() == static_cast<size_t>(topology.num_nodes()) &&
           counts.node_limit.guaranteed_share.size() == counts.node_limit.open_fraction.size()),
      "node_limit must have one entry per topology node");
  for (GpuId g : counts.gpus) {
    MOESIM_CHECK(g.value >= 0 && g.value < topology.num_gpus(), "participant outside topology");
  }
}

namespace {

enum class Direction { kDispatch, kCombine };

// Every (s, d) entry is written exactly once (0 + x == x), so no zero fill is needed first.
template <Direction dir>
void build_direct(const TokenCounts& counts, double bytes_per_token, TrafficMatrix& out) {
  const size_t p = counts.gpus.size();
  double* out_bytes = out.mutable_bytes().data();
  for (size_t s = 0; s < p; ++s) {
    const int64_t* row = &counts.tokens[s * p];
    for (size_t d = 0; d < p; ++d) {
      const double bytes = row[d] > 0 ? static_cast<double>(row[d]) * bytes_per_token : 0.0;
      out_bytes[dir == Direction::kDispatch ? s * p + d : d * p + s] = bytes;
    }
  }
}

template <Direction dir>
void build(const Topology& topology, const TokenCounts& counts, double bytes_per_token,
           DispatchAlgorithm algorithm, TrafficMatrix& out) {
  check_token_counts(counts, topology);
  MOESIM_CHECK(bytes_per_token >= 0, "bytes per token must be non-negative");
  if (algorithm != DispatchAlgorithm::kHierarchical) {
    out.reset_uninitialized(counts.gpus);
    build_direct<dir>(counts, bytes_per_token, out);
    return;
  }
  out.reset(counts.gpus);
  // Dispatch moves data from -> to, combine moves it back (to -> from).
  double* out_bytes = out.mutable_bytes().data();
  const auto p = static_cast<size_t>(counts.size());
  hierarchical_internal::for_each_hierarchical_addition(
      topology, counts, [&](int32_t from_idx, int32_t to_idx, double tokens) {
        const auto from = static_cast<size_t>(from_idx);
        const auto to = static_cast<size_t>(to_idx);
        out_bytes[dir == Direction::kDispatch ? from * p + to : to * p + from] +=
            tokens * bytes_per_token;
      });
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
