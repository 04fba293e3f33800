// Internal to sim/serving: the state and the class behind run_scenario (sim/serving/cluster.h).
// Other modules must not include this header.
//
// Seq, Rank and Replica are the serving state of one request, one attention rank (its KV cache)
// and one model replica. ClusterSim owns the Simulation and everything simulated; its members
// are defined in three files:
//   cluster.cc                 construction (build: memory layout, replicas, KV caches), run()
//   cluster_scheduler.cc       admission and routing, continuous batching, the step lifecycle
//   cluster_policy_context.cc  the PolicyContext that policies act through
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/simulation.h"
#include "sim/cost/cost_model.h"
#include "sim/memory/kv_cache.h"
#include "sim/memory/memory_layout.h"
#include "sim/network/network_model.h"
#include "sim/placement/expert_placement.h"
#include "sim/routing/routing_model.h"
#include "sim/serving/cluster.h"
#include "sim/serving/serving_policy.h"
#include "sim/serving/step_model.h"
#include "sim/workload/workload_generator.h"

namespace moesim::sim::detail {

constexpr int64_t kPrefixBlock = kPrefixBlockTokens;

// One request being served.
struct Seq {
  Request req;
  int32_t replica = -1;
  int32_t rank = -1;
  int64_t prefill_target = 0;  // tokens whose KV must be computed before decoding
  int64_t prefilled = 0;
  int64_t generated = 0;
  int64_t owned_blocks = 0;         // KV + state blocks owned exclusively
  int64_t capacity_tokens = 0;      // tokens the sequence's KV blocks (owned + pinned) hold
  int64_t num_hit_blocks = 0;       // leading prefix blocks pinned from the cache
  int64_t num_inserted_blocks = 0;  // prompt prefix blocks this sequence inserted (pinned)
  uint64_t admit_order = 0;
  bool running = false;
  bool first_admission_done = false;
  bool decode_only = false;  // arrived on a decode replica with its KV transferred
};

struct Rank {
  std::unique_ptr<KvCache> kv;
  std::vector<int32_t> running;  // sequence ids in admission order
};

struct Replica {
  int32_t idx = 0;
  std::vector<GpuId> gpus;
  std::vector<Rank> ranks;
  std::deque<int32_t> waiting;
  std::unique_ptr<RoutingModel> routing;
  std::unique_ptr<NetworkModel> network;
  std::unique_ptr<StepModel> step_model;
  std::unique_ptr<ExpertPlacement> placement;  // this replica's (policies may add replicas)
  std::vector<BackgroundTransfer> transfers;
  std::map<int64_t, ServingPolicy*> transfer_owner;
  std::map<std::pair<int32_t, int32_t>, int64_t> replica_slot_blocks;  // (expert, gpu) -> blocks
  int32_t layout_slots_per_gpu = 0;  // routed-expert slots per GPU and MoE layer in the layout
  std::vector<int64_t> placement_extra_blocks;  // per rank: KV blocks held by set_expert_placement
  GpuMemoryLayout layout;
  bool prefill_only = false;
  bool decode_only = false;
  bool busy = false;
  int64_t step_idx = 0;
  int32_t num_in_flight = 0;    // admitted (running) sequences
  int32_t max_seqs = 0;         // in-flight cap (scheduler max_seqs unless a policy sets it)
  int64_t max_step_tokens = 0;  // tokens per step, all ranks (0 = no cap beyond per-rank budgets)
  int32_t outstanding = 0;      // routed here and not finished (waiting + running + transfer)
  SimTime step_start_ns = 0;
  std::vector<std::pair<int32_t, SeqSlice>> batch;  // (seq id, slice) of the running step
};

class ClusterSim final : public PolicyContext {
 public:
  // Builds the cluster (memory layout, replicas, KV caches, pools) and registers the event kinds.
  // Throws ConfigError when the deployment does not fit in memory.
  ClusterSim(const Scenario& sc, const RunOptions& opt, uint64_t seed,
             std::vector<std::unique_ptr<ServingPolicy>> policies);

  RunOutput run();

  // PolicyContext.
  SimTime now() const override { return sim_.now(); }
  void count_action(const std::string& name, int64_t n = 1) override;
  void schedule_timer(ServingPolicy* policy, SimTime delay_ns, int64_t tag) override;
  std::vector<std::string> pool_names() const override;
  int64_t pool_outstanding(const std::string& pool) const override;
  const ExpertPlacement* placement(int32_t replica) const override {
    return replicas_[replica].placement.get();
  }
  int32_t num_replicas() const override { return static_cast<int32_t>(replicas_.size()); }
  int64_t start_weight_transfer(ServingPolicy* policy, int32_t replica,
                                std::vector<double> bytes) override;
  bool add_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) override;
  void remove_expert_replica(int32_t replica, int32_t expert, int32_t gpu_idx) override;
  bool set_expert_placement(int32_t replica, const ExpertPlacement& placement) override;
  RoutingModel* routing_model(int32_t replica) override { return replicas_[replica].routing.get(); }
  void replace_routed_experts(int32_t replica, const ModelCard& card,
                              const ExpertPlacement& placement, RoutingModel* routing) override;
  void set_concurrency_limit(int32_t replica, int32_t max_seqs, int64_t max_step_tokens) override {
    Replica& r = replicas_[replica];
    if (max_seqs > 0) r.max_seqs = max_seqs;
    if (max_step_tokens > 0) r.max_step_tokens = max_step_tokens;
  }
  void report_metric(const std::string& name, double value) override {
    counters_.policy_metrics[name] = value;
  }

 private:
  struct Pool {
    std::string name;
    int32_t first = 0, last = 0;  // replicas [first, last)
  };
  void route_seq(int32_t sid, const std::string& pool);
  void after_step_policies(Replica& r, int64_t step_idx, int64_t step_tokens);
  void build();
  void schedule_next_open_loop();
  void admit_request(Request req);
  void reject(int32_t sid, const std::string& reason);
  int32_t pick_replica(const Request& req, bool decode_pool, const std::string& pool = "");
  void try_start_step(Replica& r);
  bool ensure_decode_capacity(Replica& r, int32_t rank_idx, int32_t sid);
  void preempt(Replica& r, int32_t rank_idx, int32_t sid);
  bool try_admit(Replica& r, int32_t sid, std::vector<int64_t>& budget,
                 std::vector<std::vector<SeqSlice>>& slices);
  void finish_prefill(Replica& r, Seq& s);
  void complete(Replica& r, int32_t sid);
  void release_seq_memory(Replica& r, Seq& s);
  void on_arrival(const Event& e);
  void on_step_done(const Event& e);
  void on_transfer_done(const Event& e);
  int64_t hits_on(const Rank& rank, const Seq& s) const;
  int64_t blocks_per_prefix() const { return kPrefixBlock / sc_.scheduler.kv_block_tokens; }
  // Takes n tokens of rank k's budget and of the step's total budget (a policy's cap); when the
  // total runs out every rank's budget drops to 0.
  void consume(std::vector<int64_t>& budget, int32_t k, int64_t n) {
    budget[k] -= n;
    step_tokens_left_ -= n;
    if (step_tokens_left_ <= 0) std::fill(budget.begin(), budget.end(), 0);
    for (int64_t& b : budget) b = std::min(b, step_tokens_left_);
  }
  int64_t step_tokens_left_ = 0;

  // Routed expert -> the global GPU ids of replica `r` hosting it.
  std::vector<std::vector<int32_t>> expert_gpus_of(const Replica& r) const {
    std::vector<std::vector<int32_t>> out(static_cast<size_t>(r.placement->num_experts()));
    for (int32_t e = 0; e < r.placement->num_experts(); ++e) {
      for (int32_t g : r.placement->replicas(e)) out[e].push_back(r.gpus[g].value);
    }
    return out;
  }

  const Scenario& sc_;
  RunOptions opt_;
  Simulation sim_;
  const ModelCard& card_;
  // The scenario's topology, or its copy with a calibrated profile's [network] section applied
  // (link capacities and latencies; sim/calibration/cost_model_factory.h).
  std::shared_ptr<const Topology> topology_;
  const Topology& topo_;
  EventKind k_arrival_, k_step_done_, k_transfer_, k_end_, k_timer_, k_delayed_;
  std::vector<std::unique_ptr<ServingPolicy>> policies_;
  bool any_wants_loads_ = false;
  std::vector<Pool> pools_;
  std::map<int64_t, std::string> delayed_;  // seq id -> pool, while delayed by a policy
  int64_t next_transfer_id_ = 0;
  std::vector<double> loads_scratch_;
  std::unique_ptr<CostModel> cost_;
  GpuMemoryInputs mem_inputs_;  // the layout's inputs (replace_routed_experts recomputes it)
  std::unique_ptr<ExpertPlacement> placement_;
  std::vector<int32_t> gpu_of_expert_;
  std::vector<Replica> replicas_;
  std::unique_ptr<WorkloadGenerator> workload_;
  std::map<int64_t, Request> pending_;  // arrivals scheduled but not yet happened
  int64_t next_pending_key_ = 0;
  std::vector<Seq> seqs_;
  std::vector<RequestRecord> records_;
  std::map<int32_t, int32_t> session_replica_;
  std::vector<GpuRecord> gpu_records_;
  RunCounters counters_;
  uint64_t admit_counter_ = 0;
  uint64_t lru_tick_ = 0;
  int32_t rr_next_ = 0;
  int64_t recorded_steps_ = 0;
  std::vector<StepRecord> steps_;
  // Per replica: the placement the recorded steps were last told about (global GPU ids).
  std::vector<std::vector<std::vector<int32_t>>> recorded_placement_;
  std::vector<RunOutput::PlacementChange> placement_changes_;
  std::vector<TraceSlice> trace_;
  std::vector<std::vector<SeqSlice>> slices_scratch_;
};

}  // namespace moesim::sim::detail
