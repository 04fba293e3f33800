// `moesim collective`: one synthetic MoE layer's dispatch and combine on a topology through one
// network model (sim/study/collective_study.h): latency, per-GPU bytes, the bottleneck link and
// DeepEP's logical byte counts, to hold against published kernel benchmarks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "sim/study/collective_study.h"
#include "sim/topology/topology.h"

namespace moesim::sim::api {

struct CollectiveRequest {
  std::string topology_path;  // required
  // Required: expert-parallel GPUs (GPUs 0 .. ep - 1), tokens held by each GPU before dispatch,
  // the token row width in elements, experts per token.
  std::optional<int64_t> ep, tokens_per_gpu, hidden, top_k;
  int64_t experts = 256;                    // routed experts, a multiple of ep
  int64_t expert_groups = 1;                // expert groups of the router
  std::optional<int64_t> topk_groups;       // groups each token keeps (default: expert_groups)
  std::string dispatch_dtype = "fp8";       // fp8 or bf16
  std::string combine_dtype = "bf16";       // bf16 or fp8
  std::string skew = "uniform";             // uniform, zipf:S or hot:F
  std::string algorithm = "direct";         // direct, hierarchical or low_latency
  std::optional<std::string> ll_transport;  // low_latency only: nvlink (default) or rdma
  std::string network_model = "bottleneck";
  std::optional<int64_t> seed;              // routing seed, >= 0 (default 1)
  std::optional<std::string> profile_path;  // a calibration profile's [network] section
};

struct CollectiveReport {
  Topology topology;  // as run: calibrated by the profile, pure-RDMA for that transport
  study::CollectiveStudySpec spec;
  CollectiveRequest request;
  study::CollectiveStudy study;
};

CollectiveReport collective(const CollectiveRequest& request);

// `moesim collective --json`: the request and per phase its latency, bytes, waits, the
// bottleneck link and the logical byte counts.
nlohmann::json collective_json(const CollectiveReport& report);
void write_collective_text(std::ostream& os, const CollectiveReport& report);

}  // namespace moesim::sim::api
