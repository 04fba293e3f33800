// One synthetic MoE layer's dispatch and combine on a topology: the study behind
// `moesim collective` (sim/api.h), which tests and benchmarks run without the CLI.
//
// Its routing draw is self-contained (sim/routing owns the simulator's routing models): experts
// placed contiguously on the EP group, uniform / zipf:S / hot:F popularity, one multinomial of
// (token, expert) choices per source GPU (stream "collective.routing") turned into unique
// (token, GPU) copies with experts treated as independent, and the unique (token, node) counts
// of traffic_matrix.h or node_limited_routing.h. docs/network.md ("Synthetic layer") has the
// formulas and their error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/rng.h"
#include "sim/network/network_model.h"
#include "sim/network/rdma_only_topology.h"
#include "sim/network/traffic_matrix.h"

namespace moesim::sim::study {

struct ExpertSkew {
  enum class Kind { kUniform, kZipf, kHot };
  Kind kind = Kind::kUniform;
  double zipf_exponent = 0;       // kZipf: S >= 0
  double hot_token_fraction = 0;  // kHot: 0 < F <= 1
};
// Parses "uniform", "zipf:S" (S >= 0) or "hot:F" (0 < F <= 1). On failure returns nullopt and
// sets *error to the reason.
std::optional<ExpertSkew> parse_expert_skew(std::string_view text, std::string* error);
// The text form parse_expert_skew() accepts, e.g. "zipf:1.2".
std::string expert_skew_name(const ExpertSkew& skew);

struct CollectiveStudySpec {
  int32_t ep_size = 0;         // participants: GPUs 0 .. ep_size - 1 of the topology
  int64_t tokens_per_gpu = 0;  // tokens held by each participant (> 0)
  int64_t hidden = 0;          // token row width in elements (hidden or latent size, > 0)
  int32_t top_k = 0;           // experts per token, 1 .. num_experts
  int32_t num_experts = 256;   // a multiple of ep_size
  int32_t num_groups = 1;      // expert groups (contiguous ranges), divides num_experts
  int32_t topk_groups = 1;     // groups a token keeps, 1 .. num_groups; < num_groups: limited
  WireDtype dispatch_dtype = WireDtype::kFp8;
  WireDtype combine_dtype = WireDtype::kBf16;
  ExpertSkew skew;
  // kLowLatency: DeepEP's low-latency kernels: every (token, expert) selection is its own row,
  // sent straight to the expert's GPU with no per-GPU deduplication; the counts are then
  // selections per (source, destination), the same multinomial draw.
  DispatchAlgorithm algorithm = DispatchAlgorithm::kDirect;
  // kLowLatency only: kNvlink, NVLink within an NVLink domain and the network otherwise (DeepEP's
  // current kernels); kRdma, every peer over the network, same-node ones too (the original
  // pure-RDMA kernels): run it on a Topology of rdma_only_spec() (checked).
  LowLatencyTransport transport = LowLatencyTransport::kNvlink;
  // Fixed cost of the kernels (a profile's [[network.kernel]] fit): every GPU's completion time
  // and the duration of the model get fixed_s more. Default: none.
  KernelCost dispatch_kernel;
  KernelCost combine_kernel;
  uint64_t seed = 1;
};

// The first problem with `spec` on `topology` as "--option: reason" (option names of
// `moesim collective`), or "" when it is valid. Hierarchical needs ep_size to be a multiple of
// the topology's GPUs per node (the relays must be participants).
std::string check_collective_study_spec(const CollectiveStudySpec& spec, const Topology& topology);

// Popularity of each expert (sums to 1) for `skew`, drawing permutations from `rng`.
std::vector<double> expert_popularity(const ExpertSkew& skew, int32_t num_experts, int32_t top_k,
                                      RngStream& rng);

// Routed token counts of one layer (see the file comment). Precondition: the spec is valid.
TokenCounts draw_token_counts(const Topology& topology, const CollectiveStudySpec& spec);

// Min / mean / max over participants.
struct MinMeanMax {
  double min = 0;
  double mean = 0;
  double max = 0;
};

// Bytes per rank as DeepEP's benchmark tests count them (logical: their bandwidth figures are
// these bytes divided by the kernel time) and as the links carry them (physical). Logical counts,
// times the phase's row bytes, mean over ranks:
// - intranode (tests/test_intranode.py): tokens the rank receives, its copy to itself included;
// - internode (tests/test_internode.py): (token, destination node) pairs the rank sends, its own
//   node included (the unique (token, node) estimate of traffic_matrix.h, node-limited when the
//   routing is);
// - low latency (tests/test_low_latency.py): every (token, expert) selection, T x top_k.
struct ByteAccounting {
  double intranode_logical_bytes = 0;
  double internode_logical_bytes = 0;
  double low_latency_logical_bytes = 0;
  MinMeanMax nvlink_sent_bytes;   // physical: to GPUs of the sender's NVLink domain
  MinMeanMax network_sent_bytes;  // physical: to GPUs of other domains (NIC)
};

struct CollectivePhase {
  TrafficMatrix traffic;
  CollectiveResult result;
  double bytes_per_token = 0;
  MinMeanMax sent_bytes;      // per GPU, to other GPUs
  MinMeanMax received_bytes;  // per GPU, from other GPUs
  MinMeanMax barrier_wait_ns;
  ByteAccounting accounting;
};

struct CollectiveStudy {
  TokenCounts counts;
  CollectivePhase dispatch;
  CollectivePhase combine;
};

// Draws the routing, builds both traffic matrices and runs them through `model` (made for
// `topology`). Precondition: check_collective_study_spec(spec, topology) is "".
CollectiveStudy run_collective_study(const Topology& topology, NetworkModel& model,
                                     const CollectiveStudySpec& spec);

}  // namespace moesim::sim::study
