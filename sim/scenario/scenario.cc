#include "sim/scenario/scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "sim/config/input_files.h"
#include "sim/config/toml_source.h"
#include "sim/model/model_card_parser.h"
#include "sim/placement/eplb.h"
#include "sim/routing/routing_trace.h"
#include "sim/scenario/comm_sms.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim {
namespace {

std::string resolve(const std::string& base_dir, const std::string& rel) {
  std::filesystem::path p(rel);
  if (p.is_absolute()) return rel;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

WireDtype parse_wire(TomlTable& t, std::string_view key, WireDtype dflt) {
  std::string v = t.get_enum_or(key, {"fp8", "bf16"}, wire_dtype_name(dflt));
  return *parse_wire_dtype(v);
}

// Experts (+ redundant slots) must fill the GPUs of a replica evenly; an EPLB layout must also
// satisfy the balancer's shape (groups, nodes), and the placement policies still keep one map for
// every MoE layer, so they cannot run on per-layer EPLB layouts.
// [deployment] eplb_loads: a routing trace (docs/schemas/routing_trace.md) of this model's MoE
// layers and experts; its selections summed over steps and sources are each layer's profiled
// loads. Read once, here.
void read_eplb_loads(Scenario& s, const RoutingShape& shape, TomlTable& dep,
                     const std::string& base_dir) {
  DeploymentSpec& d = s.deployment;
  d.eplb_loads_path = resolve(base_dir, d.eplb_loads_path);
  check_input_path(dep, "eplb_loads", d.eplb_loads_path, InputKind::kData);
  const RoutingTrace trace = load_routing_trace(d.eplb_loads_path);
  if (trace.header.num_moe_layers != shape.num_moe_layers ||
      trace.header.num_experts != shape.num_experts) {
    dep.fail("eplb_loads", d.eplb_loads_path + " has " +
                               std::to_string(trace.header.num_moe_layers) + " MoE layers of " +
                               std::to_string(trace.header.num_experts) +
                               " experts; the model has " + std::to_string(shape.num_moe_layers) +
                               " of " + std::to_string(shape.num_experts));
  }
  auto loads = std::make_shared<std::vector<std::vector<double>>>(
      static_cast<size_t>(shape.num_moe_layers),
      std::vector<double>(static_cast<size_t>(shape.num_experts), 0.0));
  for (int64_t step = 0; step < trace.num_steps; ++step) {
    for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
      const CountMatrix& m = trace.at(step, l);
      for (int32_t src = 0; src < m.num_rows(); ++src) {
        for (int32_t e = 0; e < m.num_cols(); ++e) (*loads)[l][e] += m.at(src, e);
      }
    }
  }
  d.eplb_loads = std::move(loads);
}

void check_expert_slots(const Scenario& s, const RoutingShape& shape, TomlTable& dep) {
  const DeploymentSpec& d = s.deployment;
  const int64_t slots = int64_t{shape.num_experts} + d.redundant_slots;
  if (slots % d.gpus_per_replica != 0) {
    dep.fail(
        "gpus_per_replica",
        std::to_string(shape.num_experts) + " routed experts" +
            (d.redundant_slots > 0 ? " + " + std::to_string(d.redundant_slots) + " redundant slots"
                                   : std::string()) +
            " do not divide over " + std::to_string(d.gpus_per_replica) + " GPUs");
  }
  if (d.placement != PlacementLayout::kEplb) return;
  const int32_t gpus_per_node = std::min(d.gpus_per_replica, s.topology->gpus_per_node());
  if (d.gpus_per_replica % gpus_per_node != 0) {
    dep.fail("gpus_per_replica",
             "placement = \"eplb\" needs whole nodes: " + std::to_string(d.gpus_per_replica) +
                 " GPUs over " + std::to_string(gpus_per_node) + " GPUs per node");
  }
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : s.model->layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  EplbShape es;
  es.num_experts = shape.num_experts;
  es.num_physical_slots = static_cast<int32_t>(slots);
  es.num_groups = static_cast<int32_t>(std::max<int64_t>(1, moe->num_expert_groups));
  es.num_nodes = d.gpus_per_replica / gpus_per_node;
  es.num_gpus = d.gpus_per_replica;
  validate_eplb_shape(es, s.source_file + ": deployment");
}

DeploymentSpec parse_deployment(TomlTable& t, const Topology& topo) {
  DeploymentSpec d;
  d.num_replicas = static_cast<int32_t>(t.get_int_in("replicas", 1, 1 << 20));
  d.gpus_per_replica = static_cast<int32_t>(t.get_int_in("gpus_per_replica", 1, topo.num_gpus()));
  if (static_cast<int64_t>(d.num_replicas) * d.gpus_per_replica > topo.num_gpus()) {
    t.fail("replicas", std::to_string(d.num_replicas) + " replicas x " +
                           std::to_string(d.gpus_per_replica) + " GPUs exceed the topology's " +
                           std::to_string(topo.num_gpus()) + " GPUs");
  }
  d.attention = t.get_enum_or("attention", {"dp", "tp"}, "dp") == "dp" ? AttentionParallel::kData
                                                                       : AttentionParallel::kTensor;
  d.attention_tp = static_cast<int32_t>(t.get_int_in_or("attention_tp", 1, 1024, 1));
  if (d.attention == AttentionParallel::kData && d.attention_tp != 1) {
    t.fail("attention_tp", "must be 1 with attention = \"dp\"");
  }
  if (d.gpus_per_replica % d.attention_tp != 0) {
    t.fail("attention_tp",
           "must divide gpus_per_replica (" + std::to_string(d.gpus_per_replica) + ")");
  }
  const std::string placement =
      t.get_enum_or("placement", {"contiguous", "strided", "eplb"}, "contiguous");
  d.placement = placement == "contiguous" ? PlacementLayout::kContiguous
                : placement == "strided"  ? PlacementLayout::kStrided
                                          : PlacementLayout::kEplb;
  d.redundant_slots = static_cast<int32_t>(t.get_int_in_or("redundant_slots", 0, 1 << 20, 0));
  if (d.redundant_slots > 0 && d.placement != PlacementLayout::kEplb) {
    t.fail("redundant_slots",
           "needs placement = \"eplb\" (the static layouts have one slot per "
           "expert)");
  }
  if (t.has("eplb_loads")) {
    d.eplb_loads_path = t.get_string("eplb_loads");  // resolved and read by load_scenario
    if (d.placement != PlacementLayout::kEplb) {
      t.fail("eplb_loads", "needs placement = \"eplb\" (the loads an EPLB layout is balanced for)");
    }
  }
  d.dispatch = *parse_dispatch_algorithm(
      t.get_enum_or("dispatch", {"direct", "hierarchical", "low_latency"}, "direct"));
  d.dispatch_dtype = parse_wire(t, "dispatch_dtype", WireDtype::kFp8);
  d.combine_dtype = parse_wire(t, "combine_dtype", WireDtype::kBf16);
  d.node_limited_traffic = t.get_bool_or("node_limited_traffic", false);
  if (d.node_limited_traffic && d.dispatch != DispatchAlgorithm::kHierarchical) {
    t.fail("node_limited_traffic",
           "needs dispatch = \"hierarchical\" (it changes the unique (token, node) pairs that "
           "hierarchical dispatch sends)");
  }
  // microbatch_overlap = true is overlap = "simple" (the key predates the schedules).
  const bool simple = t.get_bool_or("microbatch_overlap", false);
  const std::string overlap =
      t.get_enum_or("overlap", {"none", "simple", "two_microbatch", "decode_pipeline"},
                    simple ? "simple" : "none");
  parse_overlap_mode(overlap, &d.overlap);  // get_enum_or admitted only valid names
  if (t.has("microbatch_overlap") && t.has("overlap") &&
      (d.overlap == OverlapMode::kSimple) != simple) {
    t.fail("overlap", "overlap = \"" + overlap +
                          "\" conflicts with microbatch_overlap = " + (simple ? "true" : "false") +
                          " (microbatch_overlap = true means overlap = \"simple\"; set one key)");
  }
  d.comm_sms = parse_comm_sms(t, d.dispatch, d.gpus_per_replica, topo);
  d.prefill_replicas = static_cast<int32_t>(t.get_int_in_or("prefill_replicas", 0, 1 << 20, 0));
  if (d.prefill_replicas >= d.num_replicas) {
    t.fail("prefill_replicas", std::to_string(d.prefill_replicas) +
                                   " prefill replicas leave no decode replica (replicas = " +
                                   std::to_string(d.num_replicas) + ")");
  }
  int32_t pooled = 0;
  for (TomlTable& p : t.get_table_array("pools", false)) {
    PoolSpec pool;
    pool.name = p.get_string("name");
    pool.num_replicas = static_cast<int32_t>(p.get_int_in("replicas", 1, d.num_replicas));
    for (const PoolSpec& q : d.pools) {
      if (q.name == pool.name) p.fail("name", "pool '" + pool.name + "' declared twice");
    }
    pooled += pool.num_replicas;
    p.finish();
    d.pools.push_back(pool);
  }
  if (!d.pools.empty() && pooled != d.num_replicas) {
    t.fail("pools", "pools hold " + std::to_string(pooled) + " replicas, the deployment has " +
                        std::to_string(d.num_replicas));
  }
  if (!d.pools.empty() && d.prefill_replicas > 0) {
    t.fail("pools", "pools and prefill_replicas cannot be combined");
  }
  t.finish();
  return d;
}

SchedulerSpec parse_scheduler(TomlTable& t) {
  SchedulerSpec s;
  std::string router = t.get_enum_or(
      "router", {"round_robin", "least_outstanding", "session_affinity", "cache_aware"},
      "least_outstanding");
  s.router = router == "round_robin"         ? RouterPolicy::kRoundRobin
             : router == "least_outstanding" ? RouterPolicy::kLeastOutstanding
             : router == "session_affinity"  ? RouterPolicy::kSessionAffinity
                                             : RouterPolicy::kCacheAware;
  s.max_seqs = static_cast<int32_t>(t.get_int_in_or("max_seqs", 1, 1 << 20, s.max_seqs));
  s.max_queued_requests =
      t.get_int_in_or("max_queued_requests", 1, int64_t{1} << 30, s.max_queued_requests);
  s.max_batch_tokens_per_gpu =
      t.get_int_in_or("max_batch_tokens_per_gpu", 1, 1 << 24, s.max_batch_tokens_per_gpu);
  s.kv_block_tokens = t.get_int_in_or("kv_block_tokens", 1, 512, s.kv_block_tokens);
  if (512 % s.kv_block_tokens != 0) {
    t.fail("kv_block_tokens", "must divide 512 (the prefix-block size of traces)");
  }
  s.prefix_caching = t.get_bool_or("prefix_caching", s.prefix_caching);
  s.workspace_gib = t.get_double_in_or("workspace_gib", 0.0, 1e4, s.workspace_gib);
  s.hbm_reserve_fraction =
      t.get_double_in_or("hbm_reserve_fraction", 0.0, 0.99, s.hbm_reserve_fraction);
  s.weight_transfer_chunk_mib =
      t.get_double_in_or("weight_transfer_chunk_mib", 1e-3, 1e6, s.weight_transfer_chunk_mib);
  if (s.router == RouterPolicy::kCacheAware && !s.prefix_caching) {
    t.fail("router", "\"cache_aware\" routes by cached prefixes: it needs prefix_caching = true");
  }
  t.finish();
  return s;
}

// [kv_tiers]: capacities per node from the scenario, bounded by the topology's [host] figures,
// which also give the link bandwidths (sim/memory/kv_tiers.h).
KvTierSpec parse_kv_tiers(TomlTable& t, const Topology& topo, const SchedulerSpec& sched) {
  constexpr double kGiga = 1e9;
  const HostSpec& host = topo.spec().host;
  const std::string where = "the topology '" + topo.name() + "' [host] table";
  auto gb = [](int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(bytes) / kGiga);
    return std::string(buf);
  };
  KvTierSpec k;
  k.enabled = true;
  const double dram_gbytes = t.get_double_in_or("dram_gbytes", 0.0, 1e9, 0.0);
  const double ssd_gbytes = t.get_double_in_or("ssd_gbytes", 0.0, 1e9, 0.0);
  if (!(dram_gbytes > 0) && !(ssd_gbytes > 0)) {
    t.fail("dram_gbytes", "no tier: give dram_gbytes and/or ssd_gbytes > 0 (per node)");
  }
  if (!sched.prefix_caching) {
    t.fail("dram_gbytes",
           "KV tiers hold prefix-cache entries: they need [scheduler] "
           "prefix_caching = true");
  }
  if (!(host.pcie_bytes_per_s > 0)) {
    t.fail("dram_gbytes", "needs pcie_gbytes_per_s (the GPU's host link) in " + where);
  }
  if (dram_gbytes > 0) {
    if (host.dram_bytes <= 0) t.fail("dram_gbytes", "needs dram_gbytes in " + where);
    if (dram_gbytes * kGiga > static_cast<double>(host.dram_bytes)) {
      t.fail("dram_gbytes",
             "exceeds the node's host DRAM (" + gb(host.dram_bytes) + " GB in " + where + ")");
    }
  }
  if (ssd_gbytes > 0) {
    if (host.nvme_bytes <= 0 || !(host.nvme_bytes_per_s > 0)) {
      t.fail("ssd_gbytes", "needs nvme_gbytes and nvme_gbytes_per_s in " + where);
    }
    if (ssd_gbytes * kGiga > static_cast<double>(host.nvme_bytes)) {
      t.fail("ssd_gbytes",
             "exceeds the node's NVMe capacity (" + gb(host.nvme_bytes) + " GB in " + where + ")");
    }
  }
  k.dram_bytes_per_node = std::llround(dram_gbytes * kGiga);
  k.ssd_bytes_per_node = std::llround(ssd_gbytes * kGiga);
  k.pcie_bytes_per_s = host.pcie_bytes_per_s;
  k.pcie_latency_ns = host.pcie_latency_ns;
  k.nvme_bytes_per_s = host.nvme_bytes_per_s;
  k.nvme_latency_ns = host.nvme_latency_ns;
  k.cluster_scope = t.get_enum_or("scope", {"node", "cluster"}, "node") == "cluster";
  k.write_through = t.get_bool_or("write_through", false);
  if (k.cluster_scope && !(topo.nic_bytes_per_s_per_gpu() > 0)) {
    t.fail("scope", "\"cluster\" reaches other nodes' tiers over the network: the topology '" +
                        topo.name() + "' has no NICs");
  }
  // The NIC shares the GPU's PCIe link with the copies (host-link contention).
  k.nic_bytes_per_s = topo.nic_bytes_per_s_per_gpu();
  k.nic_latency_ns = topo.spec().nic_latency_ns;
  t.finish();
  return k;
}

}  // namespace

const char* overlap_mode_name(OverlapMode m) {
  switch (m) {
    case OverlapMode::kNone:
      return "none";
    case OverlapMode::kSimple:
      return "simple";
    case OverlapMode::kTwoMicrobatch:
      return "two_microbatch";
    case OverlapMode::kDecodePipeline:
      return "decode_pipeline";
  }
  return "?";
}

bool parse_overlap_mode(const std::string& name, OverlapMode* mode) {
  for (OverlapMode m : {OverlapMode::kNone, OverlapMode::kSimple, OverlapMode::kTwoMicrobatch,
                        OverlapMode::kDecodePipeline}) {
    if (name == overlap_mode_name(m)) {
      *mode = m;
      return true;
    }
  }
  return false;
}

const char* router_policy_name(RouterPolicy p) {
  switch (p) {
    case RouterPolicy::kRoundRobin:
      return "round_robin";
    case RouterPolicy::kLeastOutstanding:
      return "least_outstanding";
    case RouterPolicy::kSessionAffinity:
      return "session_affinity";
    case RouterPolicy::kCacheAware:
      return "cache_aware";
  }
  return "?";
}

namespace {
Scenario parse_scenario(std::shared_ptr<const TomlDocument> doc, const std::string& path,
                        const std::string& base_dir);
}  // namespace

Scenario load_scenario(const std::string& path) {
  auto doc = std::make_shared<const TomlDocument>(TomlDocument::load_file(path));
  return parse_scenario(doc, path, std::filesystem::path(path).parent_path().string());
}

Scenario parse_scenario_text(std::string_view text, const std::string& name,
                             const std::string& base_dir) {
  auto doc = std::make_shared<const TomlDocument>(TomlDocument::parse_string(text, name));
  return parse_scenario(doc, name, base_dir);
}

namespace {

// [routing] of a model with MoE layers (defaults when absent), checked against the deployment's
// expert slots, node-limited traffic and EPLB loads; an error for a model without MoE layers.
void parse_moe_routing(TomlTable& root, TomlTable& dep, const std::string& path,
                       const std::string& base_dir, Scenario& s) {
  if (num_moe_layers(*s.model) > 0) {
    RoutingShape shape = routing_shape_of(*s.model);
    if (auto t = root.find_table("routing")) {
      s.routing = parse_routing(*t, shape);
    } else {
      TomlDocument empty = TomlDocument::parse_string("", path);
      TomlTable e = empty.root();
      s.routing = parse_routing(e, shape);
    }
    check_expert_slots(s, shape, dep);
    if (s.deployment.node_limited_traffic && shape.topk_groups >= shape.num_groups) {
      dep.fail("node_limited_traffic",
               "the model's routing is not group-limited (topk_groups = num_expert_groups = " +
                   std::to_string(shape.num_groups) + ")");
    }
    if (!s.deployment.eplb_loads_path.empty()) read_eplb_loads(s, shape, dep, base_dir);
  } else if (root.has("routing")) {
    root.fail("routing", "the model has no MoE layer");
  } else if (s.deployment.node_limited_traffic) {
    dep.fail("node_limited_traffic", "the model has no MoE layer");
  }
}

// [cost]: the cost model, and for "calibrated" its profile.
void parse_cost(TomlTable& t, const std::string& base_dir, Scenario& s) {
  std::string kind = t.get_enum_or("model", {"roofline", "calibrated"}, "roofline");
  s.cost.kind = kind == "roofline" ? CostModelKind::kRoofline : CostModelKind::kCalibrated;
  if (s.cost.kind == CostModelKind::kCalibrated) {
    s.cost.profile_path = resolve(base_dir, t.get_string("profile"));
    check_input_path(t, "profile", s.cost.profile_path, InputKind::kConfig);
    // Read once, here: every run, sweep point and replica shares the parsed profile.
    s.cost.profile = std::make_shared<const CalibrationProfile>(load_profile(s.cost.profile_path));
  }
  if (auto r = t.find_table("roofline")) s.cost.roofline = parse_roofline_params(*r);
  t.finish();
}

// [outputs]: which files a run writes, and the trace's window and replicas.
void parse_outputs(TomlTable& t, const DeploymentSpec& deployment, OutputSpec& o) {
  o.requests_csv = t.get_bool_or("requests_csv", o.requests_csv);
  o.steps_csv = t.get_bool_or("steps_csv", o.steps_csv);
  o.summary_json = t.get_bool_or("summary_json", o.summary_json);
  o.chrome_trace = t.get_bool_or("chrome_trace", o.chrome_trace);
  o.trace_start_s = t.get_double_in_or("trace_start_s", 0.0, 1e7, o.trace_start_s);
  o.trace_end_s = t.get_double_in_or("trace_end_s", 0.0, 1e7, o.trace_end_s);
  if (o.trace_end_s < o.trace_start_s) t.fail("trace_end_s", "must be >= trace_start_s");
  if (auto replicas = t.find_int_array("trace_replicas")) {
    if (replicas->empty()) {
      t.fail("trace_replicas", "names no replica (leave it out to trace every replica)");
    }
    for (int64_t r : *replicas) {
      if (r < 0 || r >= deployment.num_replicas) {
        t.fail("trace_replicas", "replica " + std::to_string(r) + " is not in [0, " +
                                     std::to_string(deployment.num_replicas - 1) + "]");
      }
      if (std::find(o.trace_replicas.begin(), o.trace_replicas.end(), r) !=
          o.trace_replicas.end()) {
        t.fail("trace_replicas", "replica " + std::to_string(r) + " given twice");
      }
      o.trace_replicas.push_back(static_cast<int32_t>(r));
    }
  }
  o.record_max_steps = t.get_int_in_or("record_max_steps", 1, INT64_MAX, o.record_max_steps);
  t.finish();
}

Scenario parse_scenario(std::shared_ptr<const TomlDocument> doc, const std::string& path,
                        const std::string& base_dir) {
  TomlTable root = doc->root();
  Scenario s;
  s.source_file = path;
  s.name = root.get_string("name");
  s.description = root.get_string_or("description", "");

  s.model_path = resolve(base_dir, root.get_string("model"));
  check_input_path(root, "model", s.model_path, InputKind::kConfig);
  s.model = std::make_shared<const ModelCard>(load_model_card(s.model_path));
  s.topology_path = resolve(base_dir, root.get_string("topology"));
  check_input_path(root, "topology", s.topology_path, InputKind::kConfig);
  s.topology = std::make_shared<const Topology>(load_topology(s.topology_path));

  TomlTable dep = root.get_table("deployment");
  s.deployment = parse_deployment(dep, *s.topology);
  if (auto t = root.find_table("scheduler")) s.scheduler = parse_scheduler(*t);
  if (auto t = root.find_table("kv_tiers")) {
    s.kv_tiers = parse_kv_tiers(*t, *s.topology, s.scheduler);
  }
  TomlTable wl = root.get_table("workload");
  s.workload = parse_workload(wl, base_dir);
  s.workload.max_request_tokens = s.model->max_context_tokens;
  if (s.workload.kind == WorkloadKind::kRequestTrace &&
      s.workload.request_trace->model_name != s.model->name) {
    // The scenario gives the deployment; the model must be the one the requests were made for.
    throw ConfigError(s.workload.request_trace_path, 1, 0, "model.name",
                      "the trace was exported for model \"" + s.workload.request_trace->model_name +
                          "\" but the scenario's model is \"" + s.model->name + "\"");
  }

  parse_moe_routing(root, dep, path, base_dir, s);

  if (auto t = root.find_table("speculative")) {
    s.speculative = parse_speculative(*t, *s.model, base_dir);
    const DeploymentSpec& dep_spec = s.deployment;
    const int64_t needed = static_cast<int64_t>(dep_spec.num_replicas) *
                           (dep_spec.gpus_per_replica + s.speculative.draft_gpus);
    if (s.speculative.draft_gpus > 0 && needed > s.topology->num_gpus()) {
      t->fail("draft_gpus", std::to_string(dep_spec.num_replicas) + " replicas x (" +
                                std::to_string(dep_spec.gpus_per_replica) + " target + " +
                                std::to_string(s.speculative.draft_gpus) +
                                " draft GPUs) exceed the topology's " +
                                std::to_string(s.topology->num_gpus()) + " GPUs");
    }
  }

  if (auto t = root.find_table("network")) {
    s.network_model = t->get_enum_or(
        "model", {"bottleneck", "bottleneck_factored", "fluid", "simgrid"}, "bottleneck");
    if (s.kv_tiers.enabled && s.network_model != "bottleneck" && s.network_model != "fluid") {
      t->fail("model",
              "[kv_tiers] copies contend with the all-to-all on the GPUs' PCIe links, "
              "which the \"bottleneck\" and \"fluid\" models apply; \"" +
                  s.network_model + "\" does not");
    }
    t->finish();
  }
  if (auto t = root.find_table("cost")) parse_cost(*t, base_dir, s);
  if (auto t = root.find_table("slo")) {
    s.slo.ttft_ms = t->get_double_in_or("ttft_ms", 1e-3, 1e9, s.slo.ttft_ms);
    s.slo.tpot_ms = t->get_double_in_or("tpot_ms", 1e-3, 1e9, s.slo.tpot_ms);
    t->finish();
  }
  if (auto t = root.find_table("run")) s.run = parse_run(*t, s.network_model);
  if (auto t = root.find_table("outputs")) parse_outputs(*t, s.deployment, s.outputs);
  if (auto t = root.find_table("policies")) {
    for (const std::string& name : t->keys()) {
      s.policies.push_back(PolicyConfig{name, doc, t->get_table(name)});
      // Pruning repacks the kept experts into one placement for every MoE layer.
      if (s.deployment.placement == PlacementLayout::kEplb && name == "expert_pruning") {
        t->fail(name,
                "cannot be combined with [deployment] placement = \"eplb\" (one layout per MoE "
                "layer): pruning repacks the kept experts into one placement for every layer");
      }
    }
    t->finish();
  }
  root.finish();
  return s;
}
}  // namespace

}  // namespace moesim::sim
