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
#include "sim/cost/cost_spec.h"
#include "sim/memory/kv_tiers.h"
#include "sim/model/model_card.h"
#include "sim/routing/routing_spec.h"
#include "sim/scenario/deployment.h"
#include "sim/scenario/fidelity.h"
#include "sim/scenario/run_spec.h"
#include "sim/scenario/speculative_spec.h"
#include "sim/topology/topology.h"
#include "sim/workload/workload_spec.h"

namespace moesim::sim {

// A policy's table parsed and validated (files it names read), opaque to this module: each
// policy in sim/policy derives its own settings type.
struct PolicySettings {
  virtual ~PolicySettings() = default;
};

// One [policies.<name>] table, kept as parsed TOML: the policy registry (sim/policy) resolves
// it into `settings` once per load (resolve_policy_settings), turns those into a policy object
// per run, and reports its errors with file, line and key path.
struct PolicyConfig {
  std::string name;
  std::shared_ptr<const TomlDocument> document;  // keeps `table` valid
  TomlTable table;
  std::shared_ptr<const PolicySettings> settings = nullptr;  // null until resolve_policy_settings
};

struct SloSpec {
  double ttft_ms = 2000;  // > 0
  double tpot_ms = 100;   // > 0
};

struct OutputSpec {
  bool requests_csv = true;
  bool steps_csv = true;  // --out: steps.csv, one row per executed step
  bool summary_json = true;
  bool chrome_trace = true;
  double trace_start_s = 0.0;  // Chrome-trace window
  double trace_end_s = 0.05;
  // Replicas whose steps the Chrome trace shows (empty: every replica); bounds its size on a
  // large deployment. Policy instants are kept either way.
  std::vector<int32_t> trace_replicas;
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
  SpeculativeSpec speculative;  // [speculative]; off (enabled = false) without the table
  KvTierSpec kv_tiers;          // [kv_tiers]: KV cache tiers below HBM; disabled when absent
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
