// Internal to sim/serving: the class behind run_scenario (sim/serving/cluster.h). ClusterSim keeps
// the event handlers that tie the parts together: the workload generator, the cluster router, the
// replicas the replica builder made, the run recorder, and the policies, which read and act
// through the PolicyContext of its ClusterPolicyView and ClusterPolicyActions. What watches a step
// (fidelity check, tiered KV traffic, speculative accounting, recording) are components it calls.
// Files: cluster.cc (construction, run, conservation), cluster_requests.cc (arrivals, admission,
// routing, completion), cluster_steps.cc (schedule -> step model -> watchers -> step done, P/D).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/id_window.h"
#include "sim/core/simulation.h"
#include "sim/metrics/request_stats.h"
#include "sim/metrics/run_recorder.h"
#include "sim/metrics/slo_watch.h"
#include "sim/metrics/steady_state.h"
#include "sim/metrics/windowed_stats.h"
#include "sim/serving/cluster.h"
#include "sim/serving/cluster_policy.h"
#include "sim/serving/cluster_router.h"
#include "sim/serving/draft_accounting.h"
#include "sim/serving/fidelity_checker.h"
#include "sim/serving/kv_tier_traffic.h"
#include "sim/serving/pd_transfer.h"
#include "sim/serving/replica.h"
#include "sim/serving/replica_builder.h"
#include "sim/serving/sequence.h"
#include "sim/serving/serving_policy.h"
#include "sim/serving/step_recorder.h"
#include "sim/workload/workload_generator.h"

namespace moesim::sim::detail {

class ClusterSim {
 public:
  // Builds the cluster (replicas through the replica builder, GPU records) and registers the
  // event kinds. Throws ConfigError when the deployment does not fit in memory.
  ClusterSim(const Scenario& sc, const RunOptions& opt, uint64_t seed,
             std::vector<std::unique_ptr<ServingPolicy>> policies);

  RunOutput run();

 private:
  // cluster.cc
  void register_events();
  void check_conservation(RunOutput& out);
  // Runs until `end`, then on while [run] max_duration_s allows and the window has not converged
  // (steady_state.h); returns the analysis of the window it ended with.
  SteadyStateResult run_until_converged(SimTime end);
  // RunOptions::stop_on_certain_failure: the watch, with the open-loop requests arriving by the
  // run's end counted from a second generator on the same stream (nothing for agent sessions).
  void start_slo_watch();
  // Whether the workload's open-loop stream has ended before `t` (counted from a second generator
  // on the same stream, as the watch counts requests).
  bool workload_ends_before(SimTime t) const;
  // RunOptions::cancel set: stop the run.
  void check_cancel() {
    if (opt_.cancel != nullptr && opt_.cancel->load(std::memory_order_relaxed)) {
      cancelled_ = true;
      sim_.stop();
    }
  }
  // Stops the run when the watch has decided (after a first token, completion or rejection).
  void check_slo_watch() {
    if (slo_watch_ && slo_watch_->failed()) sim_.stop();
  }
  // cluster_requests.cc
  void schedule_next_open_loop();
  void schedule_arrival(Request req, bool open_loop);
  void on_arrival(const Event& e);
  void admit_request(Request req);
  // What every rejection does: the record's outcome, the counters, the SLO watch, the policies,
  // the session; frees the request's prefix hashes.
  void count_rejection(Request& req, RequestRecord& rec, const std::string& reason);
  // A rejection on arrival: the request gets no sequence; its record goes to the statistics now
  // and to the sinks through the spool (record_spool.h) once the older records have.
  void reject_on_arrival(Request& req, int64_t arrival_idx, const std::string& reason);
  // A sequence's rejection after its arrival (a delayed admission meeting a full queue).
  void reject(int32_t sid, const std::string& reason);
  void route_seq(int32_t sid, const std::string& pool);
  // Queues sequence `sid` on replica `ri` (its queue has room).
  void enqueue(int32_t sid, int32_t ri);
  void complete(Replica& r, int32_t sid);
  // Retires the final records at the front of the window (all of them with `all`, at the end),
  // with the spooled records that arrived before them.
  void retire_finished(bool all = false);
  // A final record, in arrival order, to the sinks and RunOptions::keep_requests.
  void emit_record(const RequestRecord& rec, SimTime end_ns);
  // cluster_steps.cc
  void try_start_step(Replica& r);
  void on_step_done(const Event& e);
  // Advances one finished slice's sequence; true when it moves to a decode replica.
  bool advance_sequence(Replica& r, int32_t sid, const SeqSlice& slice);
  void transfer_kv(Replica& r, int32_t sid);
  void on_transfer_done(const Event& e);
  void after_step_policies(Replica& r);

  const Scenario& sc_;
  RunOptions opt_;
  Simulation sim_;
  const ModelCard& card_;
  ReplicaBuilder builder_;
  EventKind k_arrival_ = 0, k_step_done_ = 0, k_transfer_ = 0, k_end_ = 0, k_timer_ = 0;
  EventKind k_delayed_ = 0, k_kv_load_ = 0;  // k_kv_load_ registered only with [kv_tiers]
  std::vector<std::unique_ptr<ServingPolicy>> policies_;
  bool any_wants_loads_ = false;
  // RunOptions::expert_selections: the steps' expected loads summed (MoE layer x expert,
  // row-major; empty until a step reports some).
  std::vector<double> expert_selections_;
  ClusterRouter router_;
  // The lower KV tiers of every node ([kv_tiers]; null without): the schedulers demote to and
  // load from them.
  std::unique_ptr<KvTiers> kv_tiers_;
  RunRecorder recorder_;
  ReplicaRunSetup setup_;
  std::vector<Replica> replicas_;
  // The policies' view of the cluster and actions on it, and the context their hooks receive.
  std::unique_ptr<ClusterPolicyParts> policy_parts_;
  std::unique_ptr<ClusterPolicyView> policy_view_;
  std::unique_ptr<ClusterPolicyActions> policy_actions_;
  std::optional<PolicyContext> policy_ctx_;
  // What watches the steps.
  std::unique_ptr<KvTierTraffic> kv_traffic_;          // with [kv_tiers]
  std::unique_ptr<FidelityChecker> fidelity_checker_;  // RunOptions::fidelity_check_every > 0
  std::unique_ptr<DraftAcceptance> draft_acceptance_;  // [speculative]: acceptance draws
  std::unique_ptr<DraftAccounting> draft_accounting_;
  std::unique_ptr<StepRecording> recording_;
  // While delayed by a policy: arrival index (the event's id) -> sequence id and pool.
  std::map<int64_t, std::pair<int32_t, std::string>> delayed_;
  // While their KV moves to a decode replica: arrival index (the event's id) -> sequence id.
  std::map<int64_t, int32_t> transferring_;
  std::unique_ptr<PdTransfer> pd_transfer_;  // with P/D pools
  std::unique_ptr<WorkloadGenerator> workload_;
  std::map<int64_t, Request> pending_;  // arrivals scheduled but not yet happened
  // When the workload's open-loop arrivals ended (set once it has sent its last request).
  std::optional<SimTime> open_loop_end_ns_;
  int64_t next_pending_key_ = 0;
  // Sequences and their records by sequence id, from the oldest one not final on (IdWindow);
  // retire_finished() hands final records at the front to stats_, the sinks and kept_. Requests
  // rejected on arrival have none: their records wait in spool_ while older ones are in the
  // window (only with sinks or kept records; stats_ counts them at once).
  IdWindow<Seq> seqs_;
  IdWindow<RequestRecord> records_;
  int64_t num_arrived_ = 0;  // arrivals so far: the next arrival index
  bool emits_records_ = false;
  MemoryRecordSpool memory_spool_;
  RecordSpool* spool_ = nullptr;  // RunOptions::record_spool, else memory_spool_
  // Requests in the system and output tokens over time: where the warm-up ends, whether the run
  // converged (steady_state.h); the request figures by arrival segment, cut there at the end.
  SystemSeries series_;
  WindowedRequestStats stats_;
  // RunOptions::stop_on_certain_failure on an open-loop workload (null otherwise).
  std::unique_ptr<SloWatch> slo_watch_;
  bool cancelled_ = false;
  std::vector<RequestRecord> kept_;  // RunOptions::keep_requests
};

}  // namespace moesim::sim::detail
