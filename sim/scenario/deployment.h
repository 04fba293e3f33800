// The deployment and scheduler parts of a scenario: how replicas, GPUs, attention ranks, expert
// placement and all-to-all wire formats are laid out, and the continuous-batching scheduler's
// limits. Plain structs, validated by load_scenario (sim/scenario/scenario.h) and never modified
// afterwards; the hot path (step model, scheduler) includes this header, not the TOML parser.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/network/traffic_matrix.h"

namespace moesim::sim {

enum class AttentionParallel { kData, kTensor };
enum class RouterPolicy { kRoundRobin, kLeastOutstanding, kSessionAffinity, kCacheAware };
// "round_robin", "least_outstanding", "session_affinity", "cache_aware".
const char* router_policy_name(RouterPolicy p);
// Static expert layout of every MoE layer: expert e on GPU e / (E / G) or e mod G (the same map in
// every layer), or EPLB: each layer balanced on its own from the replica's profiled expert loads
// (the routing model's expected shares at step 0), with redundant slots (sim/placement/eplb.h).
enum class PlacementLayout { kContiguous, kStrided, kEplb };
// How a MoE layer's compute and all-to-alls overlap (docs/serving.md, "Overlap schedules"):
// none (barriers), the simple formula max(C, D) + min(C, D) / 2, or a micro-batch timeline
// (sim/serving/layer_timeline.h): DeepSeek's two-micro-batch prefill or its decode pipeline.
enum class OverlapMode { kNone, kSimple, kTwoMicrobatch, kDecodePipeline };
// "none", "simple", "two_microbatch", "decode_pipeline".
const char* overlap_mode_name(OverlapMode m);
// The mode of such a name; false for any other string.
bool parse_overlap_mode(const std::string& name, OverlapMode* mode);

// A named set of consecutive replicas with its own queue routing (queue isolation, long-context
// pools). Pools are declared in order and take replicas from 0 upwards.
struct PoolSpec {
  std::string name;
  int32_t num_replicas = 1;  // >= 1
};

struct DeploymentSpec {
  int32_t num_replicas = 1;      // data-parallel replicas, >= 1
  int32_t gpus_per_replica = 1;  // GPUs each replica spans (consecutive GPU ids), >= 1
  AttentionParallel attention = AttentionParallel::kData;
  int32_t attention_tp = 1;  // TP degree of attention (kTensor), divides gpus_per_replica
  PlacementLayout placement = PlacementLayout::kContiguous;
  // kEplb: redundant expert slots per MoE layer; experts + redundant slots are the physical slots,
  // spread evenly over the GPUs (expert parallelism is sized in slots: EP144 with 256 + 32).
  int32_t redundant_slots = 0;
  // kEplb: the profiled loads the layout is balanced for, per MoE layer and routed expert: the
  // selection totals of the routing trace `eplb_loads_path` names (summed over its steps and
  // sources), read at load time; null: the routing model's expected shares at step 0.
  std::string eplb_loads_path;
  std::shared_ptr<const std::vector<std::vector<double>>> eplb_loads;
  DispatchAlgorithm dispatch = DispatchAlgorithm::kDirect;
  WireDtype dispatch_dtype = WireDtype::kFp8;
  WireDtype combine_dtype = WireDtype::kBf16;
  // Hierarchical dispatch: estimate unique (token, node) pairs under the model card's
  // group-limited routing (sim/network/node_limited_routing.h) instead of independent GPUs.
  bool node_limited_traffic = false;
  // [deployment] overlap; microbatch_overlap = true is kSimple.
  OverlapMode overlap = OverlapMode::kNone;
  // SMs a dispatch or combine holds on every GPU while it runs: under a micro-batch timeline the
  // compute beside it gets the rest (docs/serving.md, "SM sharing"). [deployment] comm_sms,
  // default by kernel family (sim/scenario/comm_sms.h); 0 <= comm_sms < the GPU's num_sms.
  int32_t comm_sms = 0;
  int32_t prefill_replicas = 0;  // > 0: P/D disaggregation, the first N replicas prefill only
  // Replica pools; empty = one pool "default" holding every replica. Not with prefill_replicas.
  std::vector<PoolSpec> pools;
};

struct SchedulerSpec {
  RouterPolicy router = RouterPolicy::kLeastOutstanding;
  int32_t max_seqs = 256;  // in-flight sequences per replica
  // Requests waiting for admission per replica at most: an arrival routed to a full queue is
  // rejected ("queue_full"), so overload is a reported condition, never unbounded memory.
  int64_t max_queued_requests = 100000;
  int64_t max_batch_tokens_per_gpu = 8192;  // tokens per attention rank per step
  int64_t kv_block_tokens = 64;             // divides 512 (the prefix-block size)
  bool prefix_caching = true;
  double workspace_gib = 4.0;          // per GPU
  double hbm_reserve_fraction = 0.05;  // of HBM kept free
  // Background weight transfers (replication) send at most this much per GPU pair alongside
  // each dispatch collective.
  double weight_transfer_chunk_mib = 8.0;
};

}  // namespace moesim::sim
