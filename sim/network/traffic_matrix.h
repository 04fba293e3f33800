// The bytes one collective moves between the GPUs of an expert-parallel group, and how they are
// derived from routed token counts.
//
// A TrafficMatrix is dense over the group's participants (not the cluster), row-major, in double
// bytes; the diagonal stays on the GPU and models ignore it. A row support (set by TrafficPlan)
// lets readers skip entries that are +0.0 without changing a bit of any sum. Dispatch sends one
// row per (token, destination GPU), directly or hierarchically (one network crossing per
// (token, node) to the relay on the source's rail, then NVLink); combine is the transpose.
// docs/network.md ("Traffic matrix") has the row sizes, the relay rule and the unique
// (token, node) estimates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "sim/core/ids.h"
#include "sim/network/node_limited_routing.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

class TrafficMatrix {
 public:
  TrafficMatrix() = default;
  // A zero matrix over `gpus` (distinct, valid GpuIds of the topology it will run on).
  explicit TrafficMatrix(std::span<const GpuId> gpus) { reset(gpus); }

  // Sets the participants and zeroes every entry; reuses storage.
  void reset(std::span<const GpuId> gpus);
  // Sets the participants and leaves the entries unspecified, for a caller that writes every
  // entry next (e.g. the direct dispatch builder); reuses storage.
  void reset_uninitialized(std::span<const GpuId> gpus);
  void fill_zero();

  // Number of participants.
  int32_t size() const { return static_cast<int32_t>(gpus_.size()); }
  GpuId gpu(int32_t idx) const { return gpus_[idx]; }
  const std::vector<GpuId>& gpus() const { return gpus_; }

  double bytes(int32_t src_idx, int32_t dst_idx) const { return bytes_[flat(src_idx, dst_idx)]; }
  // Both drop the row support.
  void set_bytes(int32_t src_idx, int32_t dst_idx, double bytes) {
    has_support_ = false;
    bytes_[flat(src_idx, dst_idx)] = bytes;
  }
  void add_bytes(int32_t src_idx, int32_t dst_idx, double bytes) {
    has_support_ = false;
    bytes_[flat(src_idx, dst_idx)] += bytes;
  }
  // Every entry, row-major (entry (s, d) at s * size() + d), for a writer that fills the
  // matrix in place; drops the row support.
  std::span<double> mutable_bytes() {
    has_support_ = false;
    return bytes_;
  }
  // Row src_idx: bytes to every participant.
  std::span<const double> row(int32_t src_idx) const {
    return {bytes_.data() + flat(src_idx, 0), gpus_.size()};
  }

  // Bytes participant idx sends to / receives from the others (diagonal excluded).
  double sent_bytes(int32_t idx) const;
  double received_bytes(int32_t idx) const;
  // All off-diagonal bytes: the sum over rows in order of each row's sum in column order.
  double total_bytes() const;

  // Whether the matrix carries a row support (see the file comment), and row src_idx's support:
  // ascending participant indices, a superset of the row's non-zero entries (it may hold the
  // diagonal and zero entries). Precondition of support(): has_support().
  bool has_support() const { return has_support_; }
  std::span<const int32_t> support(int32_t src_idx) const {
    return {support_cols_.data() + support_begin_[src_idx],
            static_cast<size_t>(support_begin_[src_idx + 1] - support_begin_[src_idx])};
  }

 private:
  friend class TrafficPlan;  // writes entries and the support it guarantees

  size_t flat(int32_t src_idx, int32_t dst_idx) const {
    return static_cast<size_t>(src_idx) * gpus_.size() + static_cast<size_t>(dst_idx);
  }
  std::vector<GpuId> gpus_;
  std::vector<double> bytes_;
  // Row src's support is support_cols_[support_begin_[src], support_begin_[src + 1]).
  bool has_support_ = false;
  std::vector<int32_t> support_begin_;
  std::vector<int32_t> support_cols_;
};

// Routed tokens of one MoE layer over the participants of an expert-parallel group.
struct TokenCounts {
  // The participants (distinct GpuIds); everything below is indexed by participant index.
  std::vector<GpuId> gpus;
  // tokens[s * P + d]: tokens held by s with at least one selected expert on d (one copy per
  // destination GPU). The diagonal counts tokens served locally.
  std::vector<int64_t> tokens;
  // tokens_per_src[s]: tokens held by s (each once); >= every tokens[s * P + d].
  std::vector<int64_t> tokens_per_src;
  // Optional (empty = approximate, see the file comment): unique_node_tokens[s * N + n] for the
  // topology's N nodes: tokens held by s with at least one selected expert on node n.
  std::vector<int64_t> unique_node_tokens;
  // Optional (empty = unlimited): node-limited routing, per topology node; when given and
  // unique_node_tokens is empty, the estimate of node_limited_routing.h replaces the independent
  // one.
  NodeLimit node_limit;

  int32_t size() const { return static_cast<int32_t>(gpus.size()); }
  int64_t at(int32_t src_idx, int32_t dst_idx) const {
    return tokens[static_cast<size_t>(src_idx) * gpus.size() + static_cast<size_t>(dst_idx)];
  }
};

// kDirect: one row per (token, destination GPU) straight to the GPU (NCCL-style).
// kHierarchical: DeepEP's normal internode kernels (once per (token, node) over the network, then
// NVLink). kLowLatency: DeepEP's low-latency kernels: one row per (token, expert) selection
// straight to the expert's GPU, no per-GPU deduplication; its TokenCounts hold selections (and may
// exceed tokens_per_src), and its traffic is built as kDirect's from them.
enum class DispatchAlgorithm { kDirect, kHierarchical, kLowLatency };
// "direct", "hierarchical", "low_latency".
const char* dispatch_algorithm_name(DispatchAlgorithm algorithm);
std::optional<DispatchAlgorithm> parse_dispatch_algorithm(std::string_view name);

// How DeepEP's low-latency kernels reach a peer: kNvlink, over NVLink within an NVLink domain and
// the network otherwise (the current kernels); kRdma, every peer over the network, same-node ones
// too (the original pure-RDMA kernels).
enum class LowLatencyTransport { kNvlink, kRdma };
// "nvlink", "rdma".
const char* low_latency_transport_name(LowLatencyTransport transport);
std::optional<LowLatencyTransport> parse_low_latency_transport(std::string_view name);

// Element types of a token row on the wire.
enum class WireDtype { kBf16, kFp8 };
// "bf16", "fp8".
const char* wire_dtype_name(WireDtype dtype);
std::optional<WireDtype> parse_wire_dtype(std::string_view name);

// Bytes of one token row of `hidden` > 0 elements: bf16 2 bytes per element; fp8 1 byte per
// element plus one FP32 scale per 128 elements (rounded up), DeepEP's FP8 dispatch layout.
// Routing metadata (top-k ids and weights, a few tens of bytes) is not counted.
double token_bytes(int64_t hidden, WireDtype dtype);

// Writes into `out` (reset to counts.gpus) the dispatch bytes of `counts` with rows of
// `bytes_per_token` each, for `algorithm`. Hierarchical preconditions (checked): for every
// source and every other node holding a destination, the source's rail GPU on that node is a
// participant; unique_node_tokens, when given, has P x topology.num_nodes() entries.
void build_dispatch_traffic(const Topology& topology, const TokenCounts& counts,
                            double bytes_per_token, DispatchAlgorithm algorithm,
                            TrafficMatrix& out);
// The matching combine: the same (token, GPU) pairs travelling back, `bytes_per_token` per row.
// (TrafficPlan, traffic_plan.h, gives both from one pass over the counts, bit for bit.)
void build_combine_traffic(const Topology& topology, const TokenCounts& counts,
                           double bytes_per_token, DispatchAlgorithm algorithm, TrafficMatrix& out);

}  // namespace moesim::sim
