// A scenario: one file naming a model, a topology, a deployment, a workload, routing skew,
// network and cost models, policies, SLOs and run settings. Parsed once at the edge into this
// plain struct (every error a ConfigError with file, line:column, key path, reason) and never
// modified afterwards. docs/scenarios.md is the full key reference.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/cost/roofline.h"
#include "sim/model/model_card.h"
#include "sim/network/traffic_matrix.h"
#include "sim/routing/routing_spec.h"
#include "sim/topology/topology.h"
#include "sim/workload/workload_spec.h"

namespace moesim::sim {

enum class AttentionParallel { kData, kTensor };
enum class RouterPolicy { kRoundRobin, kLeastOutstanding, kSessionAffinity };
// "round_robin", "least_outstanding", "session_affinity".
const char* router_policy_name(RouterPolicy p);
enum class PlacementLayout { kContiguous, kStrided };

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
  DispatchAlgorithm dispatch = DispatchAlgorithm::kDirect;
  WireDtype dispatch_dtype = WireDtype::kFp8;
  WireDtype combine_dtype = WireDtype::kBf16;
  bool microbatch_overlap = false;  // two micro-batches: compute of one hides the other's comm
  int32_t prefill_replicas = 0;     // > 0: P/D disaggregation, the first N replicas prefill only
  // Replica pools; empty = one pool "default" holding every replica. Not with prefill_replicas.
  std::vector<PoolSpec> pools;
};

struct SchedulerSpec {
  RouterPolicy router = RouterPolicy::kLeastOutstanding;
  int32_t max_seqs = 256;                   // in-flight sequences per replica
  int64_t max_batch_tokens_per_gpu = 8192;  // tokens per attention rank per step
  int64_t kv_block_tokens = 64;             // divides 512 (the prefix-block size)
  bool prefix_caching = true;
  double workspace_gib = 4.0;          // per GPU
  double hbm_reserve_fraction = 0.05;  // of HBM kept free
  // Background weight transfers (replication) send at most this much per GPU pair alongside
  // each dispatch collective.
  double weight_transfer_chunk_mib = 8.0;
};

// One [policies.<name>] table, kept as parsed TOML: the policy registry (sim/policy) turns it
// into a policy object per run, and reports its errors with file, line and key path.
struct PolicyConfig {
  std::string name;
  std::shared_ptr<const TomlDocument> document;  // keeps `table` valid
  TomlTable table;
};

enum class CostModelKind { kRoofline, kCalibrated };
struct CostSpec {
  CostModelKind kind = CostModelKind::kRoofline;
  std::string profile_path;  // kCalibrated
  RooflineParams roofline = RooflineParams::defaults();
};

struct SloSpec {
  double ttft_ms = 2000;  // > 0
  double tpot_ms = 100;   // > 0
};

struct RunSpec {
  uint64_t seed = 1;
  double duration_s = 60;  // simulated time; requests still running then are "in flight"
};

struct OutputSpec {
  bool requests_csv = true;
  bool summary_json = true;
  bool chrome_trace = true;
  double trace_start_s = 0.0;  // Chrome-trace window
  double trace_end_s = 0.05;
  int64_t record_max_steps = 1000;  // --record: steps written at most
};

struct Scenario {
  std::string name;
  std::string description;
  std::string source_file;
  std::string model_path;
  std::string topology_path;
  std::shared_ptr<const ModelCard> model;
  std::shared_ptr<const Topology> topology;
  DeploymentSpec deployment;
  SchedulerSpec scheduler;
  WorkloadSpec workload;
  RoutingSpec routing;
  std::string network_model = "bottleneck";
  CostSpec cost;
  SloSpec slo;
  RunSpec run;
  OutputSpec outputs;
  std::vector<PolicyConfig> policies;  // in file order
};

// Loads and validates a scenario file (model and topology files are resolved relative to it).
Scenario load_scenario(const std::string& path);
// Parses scenario text (e.g. a file with sweep overrides applied); `name` stands for the file in
// messages and `base_dir` resolves relative paths.
Scenario parse_scenario_text(std::string_view text, const std::string& name,
                             const std::string& base_dir);

}  // namespace moesim::sim
