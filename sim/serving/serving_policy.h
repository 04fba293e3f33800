// The interface between the serving loop and the policies under study (sim/policy/).
//
// A policy is a small object with its own TOML table ([policies.<name>]), created per run by the
// policy registry. The serving loop calls its hooks with a PolicyContext: a read-only view of the
// cluster and the narrow set of actions a policy may take, every one counted (and shown in the
// Chrome trace) through count_action(). Hooks run inside event handlers: they must not block or
// read clocks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/run_metrics.h"
#include "sim/placement/expert_placement.h"
#include "sim/workload/request.h"

namespace moesim::sim {

class ServingPolicy;
class ExpertPlacement;
class LayerPlacements;
class RoutingModel;
struct ModelCard;

// What an arrival hook decided. Hooks run in registration order; the first reject wins.
struct AdmissionDecision {
  bool reject = false;
  std::string reject_reason;  // counted as action "reject:<reason>"
  // Replica pool to route to ("" = the default pool; see [[deployment.pools]]).
  std::string pool;
  // Extra delay before the request joins a queue (e.g. summarisation time), >= 0.
  SimTime delay_ns = 0;
  // Extra tokens the replica must prefill before the request's own prompt is usable (e.g. a
  // summary's generation cost charged as prefill work), >= 0.
  int64_t extra_prefill_tokens = 0;
};

// The cluster as a policy may read it (read-only).
class PolicyView {
 public:
  virtual ~PolicyView() = default;
  virtual SimTime now() const = 0;
  // Names of the replica pools, in declaration order ("default" first when implicit).
  virtual std::vector<std::string> pool_names() const = 0;
  // Requests waiting or running in a pool (its load).
  virtual int64_t pool_outstanding(const std::string& pool) const = 0;
  // Every MoE layer's routed-expert placement of a replica (null without MoE layers).
  virtual const LayerPlacements* placements(int32_t replica) const = 0;
  virtual int32_t num_replicas() const = 0;
};

// What a policy may do to the cluster. Every action is counted in the run summary.
class PolicyActions {
 public:
  virtual ~PolicyActions() = default;
  // Counts an action in the run summary and marks it in the Chrome trace.
  virtual void count_action(const std::string& name, int64_t n = 1) = 0;
  // Calls policy->on_timer(tag) after `delay_ns` (>= 0).
  virtual void schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) = 0;
  // Starts copying expert weights between GPUs of a replica: bytes[src * P + dst] for the
  // replica's P GPUs. The bytes travel alongside the replica's dispatch collectives (competing
  // with serving traffic) until all are sent; then on_transfer_done(transfer_id) is called.
  // Returns the transfer id.
  virtual int64_t start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                        std::vector<double> bytes) = 0;
  // Memory, for every change below: a GPU's routed-expert weights are one expert's weights of one
  // MoE layer per slot it holds, summed over layers. Slots beyond those of the memory layout
  // (the deployment's fullest GPU) are charged to its rank's KV pool, and slots given up go back
  // to it; a change that does not fit returns false and changes nothing.
  // Adds a replica of `expert` in MoE layer `moe_layer_idx` on replica-local GPU `gpu_idx`
  // (after its copy lands), or removes one.
  virtual bool add_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                                  int32_t gpu_idx) = 0;
  virtual void remove_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                                     int32_t gpu_idx) = 0;
  // Replaces the placement of MoE layer `moe_layer_idx` of every pair (same experts, GPUs, GPUs
  // per node and shared experts), e.g. a rebalance whose weight copies have landed; experts may
  // move. All layers change or none. Counted as "expert_placement_set" once per call.
  virtual bool set_layer_placements(
      int32_t replica, const std::vector<std::pair<int32_t, ExpertPlacement>>& layers) = 0;
  // The routing model of a replica (null without MoE layers), for policies that wrap it.
  virtual RoutingModel* routing_model(int32_t replica) = 0;
  // From on_start only (before any step): the replica serves `card` (the scenario's layers with
  // fewer routed experts per MoE layer, e.g. pruned) with `placement` of those experts on its
  // GPUs and `routing` over them. Its memory layout is recomputed, so weight bytes freed join
  // the KV pool. `card` and `routing` belong to the caller and must outlive the run. Throws
  // ConfigError when the layout does not fit.
  virtual void replace_routed_experts(int32_t replica, const ModelCard& card,
                                      const ExpertPlacement& placement, RoutingModel* routing) = 0;
  // Caps a replica's in-flight sequences and the tokens of one step (all ranks together);
  // 0 keeps the scheduler's setting for that limit.
  virtual void set_concurrency_limit(int32_t replica, int32_t max_seqs,
                                     int64_t max_step_tokens) = 0;
  // Sets a named figure reported in the run summary under "policy_metrics" (e.g. an expected
  // accuracy); the last value set wins.
  virtual void report_metric(const std::string& name, double value) = 0;
};

// What a policy's hooks receive: the cluster to read and the actions to take.
struct PolicyContext {
  const PolicyView& view;
  PolicyActions& actions;
};

class ServingPolicy {
 public:
  virtual ~ServingPolicy() = default;
  virtual std::string_view name() const = 0;
  virtual void on_start(PolicyContext& ctx) {}
  // Before a request is routed. May modify the request (e.g. shrink its prompt), reject it,
  // choose its pool or delay it.
  virtual void on_arrival(PolicyContext& ctx, Request& request, AdmissionDecision& decision) {}
  // After a request completes (its record is final).
  virtual void on_complete(PolicyContext& ctx, const Request& request,
                           const RequestRecord& record) {}
  // After a request is rejected, by a policy or the cluster (its record is final): what a policy
  // keeps for it must go, since nothing else ends it.
  virtual void on_reject(PolicyContext& ctx, const Request& request) {}
  // Whether on_expert_loads should be called (it costs a pass over experts per MoE layer).
  virtual bool wants_expert_loads() const { return false; }
  // After each step: expected selections per routed expert of one MoE layer on one replica.
  virtual void on_expert_loads(PolicyContext& ctx, int32_t replica, int32_t moe_layer_idx,
                               std::span<const double> selections) {}
  virtual void on_timer(PolicyContext& ctx, int64_t tag) {}
  virtual void on_transfer_done(PolicyContext& ctx, int64_t transfer_id) {}
  // Once, when the simulated time is over and before the summary is built (e.g. to report
  // final metrics over the whole run).
  virtual void on_finish(PolicyContext& ctx) {}
};

}  // namespace moesim::sim
