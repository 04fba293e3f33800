// Internal to sim/serving: the class behind run_scenario (sim/serving/cluster.h). Other modules
// must not include this header.
//
// ClusterSim ties the parts together in event handlers: the workload generator, the cluster
// router (cluster_router.h), one ReplicaScheduler per replica (replica_scheduler.h), the step
// models the replica builder made (replica_builder.h), the run recorder (sim/metrics) and the
// policies, which act through the PolicyContext ClusterSim implements. Its members are defined in
// four files:
//   cluster.cc                 construction, run(), the conservation check, the run output
//   cluster_requests.cc        arrivals, admission policies, rejection, routing, completion
//   cluster_steps.cc           the step lifecycle: schedule -> step model -> step done, P/D KV
//                              transfers, the per-step policy hooks
//   cluster_policy_context.cc  the PolicyContext
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/core/id_window.h"
#include "sim/core/simulation.h"
#include "sim/metrics/request_stats.h"
#include "sim/metrics/run_recorder.h"
#include "sim/metrics/slo_watch.h"
#include "sim/serving/cluster.h"
#include "sim/serving/cluster_router.h"
#include "sim/serving/replica_builder.h"
#include "sim/serving/replica_scheduler.h"
#include "sim/serving/sequence.h"
#include "sim/serving/serving_policy.h"
#include "sim/workload/workload_generator.h"

namespace moesim::sim::detail {

// One model replica: what it runs on, its scheduler, and the expert-memory bookkeeping of the
// placement policies.
struct Replica {
  int32_t idx = 0;
  ReplicaParts parts;  // GPUs, placement, routing, network, step model
  // RunOptions::tier_check_every > 0: network and step model of the other tier over the same
  // GPUs, placements and routing model (no placements or routing of its own).
  ReplicaParts shadow;
  std::unique_ptr<ReplicaScheduler> scheduler;
  std::vector<BackgroundTransfer> transfers;
  std::map<int64_t, ServingPolicy*> transfer_owner;
  // Routed-expert slots, summed over MoE layers, that the memory layout holds on every GPU (the
  // fullest GPU's at layout time); slots beyond them take KV blocks from the GPU's rank.
  int64_t layout_total_slots = 0;
  std::vector<int64_t> placement_extra_blocks;  // per rank: KV blocks held for those slots
  // Bumped by every placement change; the step recorder compares placements only when it moved.
  int64_t placement_version = 0;
  int64_t recorded_placement_version = -1;
  bool prefill_only = false;
  bool decode_only = false;
  bool busy = false;
  int64_t step_idx = 0;
  SimTime last_step_ns = 0;       // the previous step's duration (host-link contention's window)
  std::vector<GpuId> draft_gpus;  // speculative decoding's draft GPUs of its own (none: empty)
  // The running step's expert loads (StepResult::expert_loads), for the policies at its end.
  std::vector<double> step_expert_loads;

  const std::vector<GpuId>& gpus() const { return parts.gpus; }
  // Every MoE layer's placement (null without MoE layers).
  LayerPlacements* placements() const { return parts.placements.get(); }
  // GPUs per attention rank.
  int32_t tp() const { return static_cast<int32_t>(parts.gpus.size()) / scheduler->num_ranks(); }
  // Routed expert -> the global GPU ids hosting it in MoE layer `moe_layer_idx`.
  ExpertGpus expert_gpus(int32_t moe_layer_idx) const;
};

class ClusterSim final : public PolicyContext {
 public:
  // Builds the cluster (replicas through the replica builder, schedulers, GPU records) and
  // registers the event kinds. Throws ConfigError when the deployment does not fit in memory.
  ClusterSim(const Scenario& sc, const RunOptions& opt, uint64_t seed,
             std::vector<std::unique_ptr<ServingPolicy>> policies);

  RunOutput run();

  // PolicyContext (cluster_policy_context.cc).
  SimTime now() const override { return sim_.now(); }
  void count_action(const std::string& name, int64_t n = 1) override;
  void schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) override;
  std::vector<std::string> pool_names() const override { return router_.pool_names(); }
  int64_t pool_outstanding(const std::string& pool) const override {
    return router_.pool_outstanding(pool);
  }
  const LayerPlacements* placements(int32_t replica) const override {
    return replicas_[replica].placements();
  }
  int32_t num_replicas() const override { return static_cast<int32_t>(replicas_.size()); }
  int64_t start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                std::vector<double> bytes) override;
  bool add_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                          int32_t gpu_idx) override;
  void remove_expert_replica(int32_t replica, int32_t moe_layer_idx, int32_t expert,
                             int32_t gpu_idx) override;
  bool set_layer_placements(
      int32_t replica, const std::vector<std::pair<int32_t, ExpertPlacement>>& layers) override;
  RoutingModel* routing_model(int32_t replica) override {
    return replicas_[replica].parts.routing.get();
  }
  void replace_routed_experts(int32_t replica, const ModelCard& card,
                              const ExpertPlacement& placement, RoutingModel* routing) override;
  void set_concurrency_limit(int32_t replica, int32_t max_seqs, int64_t max_step_tokens) override {
    replicas_[replica].scheduler->set_limits(max_seqs, max_step_tokens);
  }
  void report_metric(const std::string& name, double value) override {
    recorder_.counters().policy_metrics[name] = value;
  }

 private:
  // cluster.cc
  void build_replicas();
  void check_conservation(RunOutput& out);
  // RunOptions::stop_on_certain_failure: the watch, with the open-loop requests arriving by the
  // run's end counted from a second generator on the same stream (nothing for agent sessions).
  void start_slo_watch();
  // Stops the run when the watch has decided (after a first token, completion or rejection).
  // RunOptions::cancel set: stop the run.
  void check_cancel() {
    if (opt_.cancel != nullptr && opt_.cancel->load(std::memory_order_relaxed)) {
      cancelled_ = true;
      sim_.stop();
    }
  }
  void check_slo_watch() {
    if (slo_watch_ && slo_watch_->failed()) sim_.stop();
  }
  // cluster_requests.cc
  void schedule_next_open_loop();
  void schedule_arrival(Request req, bool open_loop);
  void on_arrival(const Event& e);
  void admit_request(Request req);
  void reject(int32_t sid, const std::string& reason);
  void route_seq(int32_t sid, const std::string& pool);
  void complete(Replica& r, int32_t sid);
  void sync_record(int32_t sid);
  // Retires the final records at the front of the window (all of them with `all`, at the end).
  void retire_finished(bool all = false);
  // cluster_steps.cc
  void try_start_step(Replica& r);
  // RunOptions::tier_check_every: times the step on the shadow's tier and records both.
  void check_tiers(Replica& r, const ScheduledBatch& batch, const StepResult& res);
  void record_step(Replica& r, StepRecord rec, SimTime duration_ns);
  // The step series row of the step `res` just timed for `batch` (before it runs).
  void add_series_row(const Replica& r, const ScheduledBatch& batch, const StepResult& res);
  void on_step_done(const Event& e);
  // Tiered KV cache: wakes the replica when each load its last schedule() started is ready, and
  // traces the loads.
  void track_kv_loads(Replica& r);
  // A load's ready event: traces the load and wakes the replica, unless contention moved it.
  void on_kv_load_ready(const Event& e);
  // Host-link contention (docs/serving.md): before a step, slows the replica's NIC traffic on
  // GPUs whose host path carries KV copies (their share of the window the previous step's length
  // gives); after it, delays those copies by the step's NIC bytes and moves the loads' ready
  // events.
  void slow_for_kv_copies(Replica& r);
  void delay_kv_copies(Replica& r, const StepResult& res);
  void transfer_kv(Replica& r, int32_t sid);
  void on_transfer_done(const Event& e);
  void after_step_policies(Replica& r);
  // Takes or returns KV blocks so that every rank of `r` holds its GPUs' routed-expert slots
  // beyond the layout's (the most of any of its GPUs); false, changing nothing, when a rank lacks
  // the blocks.
  bool settle_expert_memory(Replica& r);

  const Scenario& sc_;
  RunOptions opt_;
  Simulation sim_;
  const ModelCard& card_;
  ReplicaBuilder builder_;
  EventKind k_arrival_, k_step_done_, k_transfer_, k_end_, k_timer_, k_delayed_;
  EventKind k_kv_load_ = 0;  // registered only with [kv_tiers]
  std::vector<std::unique_ptr<ServingPolicy>> policies_;
  bool any_wants_loads_ = false;
  ClusterRouter router_;
  // The lower KV tiers of every node ([kv_tiers]; null without): the schedulers demote to and
  // load from them.
  std::unique_ptr<KvTiers> kv_tiers_;
  // Loads in flight by KvLoad::id: replica, sequence, rank, start and (current) ready time.
  struct KvLoadInFlight {
    int32_t replica = 0;
    KvLoadStarted load;
  };
  std::unordered_map<int64_t, KvLoadInFlight> kv_loads_;  // looked up by id, never iterated
  std::vector<double> nic_in_slow_, nic_out_slow_;        // scratch
  std::vector<std::pair<int64_t, SimTime>> kv_moved_;     // scratch
  RunRecorder recorder_;
  std::map<int64_t, std::string> delayed_;  // seq id -> pool, while delayed by a policy
  int64_t next_transfer_id_ = 0;
  // Prices P/D KV transfers between replicas (the scenario's network model, whole topology).
  std::unique_ptr<NetworkModel> transfer_network_;
  TrafficMatrix transfer_traffic_;
  CollectiveResult transfer_result_;
  std::vector<Replica> replicas_;
  std::vector<TierSample> tier_samples_;
  int64_t tier_samples_skipped_ = 0;
  std::unique_ptr<WorkloadGenerator> workload_;
  std::map<int64_t, Request> pending_;  // arrivals scheduled but not yet happened
  int64_t next_pending_key_ = 0;
  // Sequences and their records by sequence id, from the oldest one not final on (IdWindow);
  // retire_finished() hands final records at the front to stats_, the sinks and kept_.
  IdWindow<Seq> seqs_;
  IdWindow<RequestRecord> records_;
  // Speculative decoding's acceptance draws ([speculative]); null without it.
  std::unique_ptr<DraftAcceptance> draft_acceptance_;
  RequestStats stats_;
  // RunOptions::stop_on_certain_failure on an open-loop workload (null otherwise).
  std::unique_ptr<SloWatch> slo_watch_;
  bool cancelled_ = false;
  std::vector<RequestRecord> kept_;  // RunOptions::keep_requests
};

}  // namespace moesim::sim::detail
