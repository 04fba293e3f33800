// The run recorder: what a run keeps of what the serving loop observes. It consumes each step's
// per-GPU times and traffic, the policy actions and the Chrome-trace slices of the steps inside
// the trace window, and (with --record) the executed steps with the placement changes between
// them; it owns the run counters and the per-GPU records. Recording never influences the
// simulation: the serving loop only writes here.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/core/ids.h"
#include "sim/core/time.h"
#include "sim/metrics/record_spool.h"
#include "sim/metrics/run_metrics.h"
#include "sim/metrics/slo_watch.h"
#include "sim/metrics/step_totals.h"

namespace moesim::sim {

// One executed step as the engine will replay it (docs/schemas/step_trace.md).
struct StepRecord {
  struct Seq {
    int32_t request = 0;
    int32_t gpu = 0;  // global GPU id of the attention rank (first GPU of a TP group)
    bool prefill = false;
    int64_t new_tokens = 0;
    int64_t context_tokens = 0;
  };
  struct Layer {
    int32_t layer = 0;
    // (src GPU, expert, dst GPU, count), global GPU ids, zero counts omitted.
    std::vector<std::array<int64_t, 4>> routing;
    double dispatch_bytes = 0;
    double combine_bytes = 0;
  };
  int64_t step = 0;
  int32_t replica = 0;
  SimTime start_ns = 0;
  SimTime end_ns = 0;
  std::vector<Seq> seqs;
  std::vector<Layer> layers;
};

// A span on one GPU's track for the Chrome trace; gpu == -1 marks an instant (a policy action)
// on the replica's process.
struct TraceSlice {
  int32_t replica = 0;
  int32_t gpu = 0;  // global GPU id, or -1
  std::string name;
  int32_t layer = -1;
  SimTime start_ns = 0;
  SimTime duration_ns = 0;
  // A compute span slowed by SM sharing (docs/serving.md, "SM sharing"): the time it lost and the
  // mean fraction of the GPU's SMs it had; 0 and 1 otherwise.
  SimTime sm_lost_ns = 0;
  double sm_share = 1;
};

// Routed expert -> the global GPU ids hosting it (one MoE layer's placement).
using ExpertGpus = std::vector<std::vector<int32_t>>;

// A replica's placement changed (e.g. a replication or balancing policy, or a per-layer layout
// that differs from the header's): from its recorded step `step` on, routed expert e of MoE layer
// `moe_layer` (every MoE layer when -1) is on the replica's global GPUs expert_gpus[e].
struct PlacementChange {
  int32_t replica = 0;
  int64_t step = 0;
  int32_t moe_layer = -1;
  ExpertGpus expert_gpus;
};

// One executed step of one replica as the step series keeps it (run --out: steps.csv): the
// batch, the replica's KV pools when the step started, and its GPUs' times in the step.
struct StepSeriesRow {
  int32_t replica = 0;
  int64_t step = 0;
  SimTime start_ns = 0;
  SimTime duration_ns = 0;
  int32_t num_seqs = 0;
  int64_t prefill_tokens = 0;  // new tokens of prefill slices
  int64_t decode_tokens = 0;   // new tokens of decode slices (one per decoding sequence)
  // Summed over the replica's attention ranks: blocks owned by sequences, blocks held only by
  // the prefix cache, and the pools' blocks; the fullest rank's (owned + cached) / pool.
  int64_t kv_owned_blocks = 0;
  int64_t kv_cached_blocks = 0;
  int64_t kv_blocks = 0;
  double kv_used_fraction_max = 0;
  // Over the replica's GPUs: mean compute, mean communication, mean and max barrier wait.
  double compute_ns_mean = 0;
  double comm_ns_mean = 0;
  double wait_ns_mean = 0;
  SimTime wait_ns_max = 0;
};

// Where request records go as they become final (RunOptions::request_sinks): completed and
// rejected records during the run, in flight ones at its end, each exactly once, in
// request-sequence (arrival) order. `end_ns` is the run's end; only in-flight records depend on
// it (slo_status, the summary's waits), and those come after the run ended.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void add(const RequestRecord& record, SimTime end_ns) = 0;
};

// Where every arrival goes as it happens (RunOptions::arrival_sink), before the admission
// policies see it (`moesim run --export-requests`): in arrival order (ties: sequence order),
// rejected ones included. `arrival_ns` is the simulated time it arrived (requests.csv's).
struct Request;
class ArrivalSink {
 public:
  virtual ~ArrivalSink() = default;
  virtual void add(const Request& request, SimTime arrival_ns) = 0;
};

// Where Chrome-trace slices go as they are made (RunOptions::trace_sink), in the order
// RunOutput::trace would hold them.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void add(std::span<const TraceSlice> slices) = 0;
};

// Where step-series rows go as steps start (RunOptions::step_series_sink), in execution order.
class StepSeriesSink {
 public:
  virtual ~StepSeriesSink() = default;
  virtual void add(const StepSeriesRow& row) = 0;
};

struct RunOptions {
  // Keep every request's record in RunOutput::requests (memory grows with the requests: tests
  // and `compare` pair requests up). Without it the run keeps only in-flight state, and records
  // reach request_sinks and the summary's streaming statistics (request_stats.h).
  bool keep_requests = false;
  std::vector<RequestSink*> request_sinks;  // not owned; must outlive the run
  // Where the records of requests rejected on arrival wait for older records before they reach
  // request_sinks and keep_requests (not owned; record_spool.h). Null: a spool in memory, which
  // grows with the rejections behind the oldest request in flight; the run's files pass one on
  // disk. Unused when there are no sinks and records are not kept.
  RecordSpool* record_spool = nullptr;
  // With chrome_trace: slices go here as they are made instead of RunOutput::trace (not owned).
  TraceSink* trace_sink = nullptr;
  // Keep one StepSeriesRow per executed step in RunOutput::step_series, or hand each to
  // step_series_sink (not owned) when there is one.
  bool step_series = false;
  StepSeriesSink* step_series_sink = nullptr;
  bool record_steps = false;
  int64_t record_max_steps = 1000;
  // Every arrival, as it happens, to this sink (not owned; must outlive the run).
  ArrivalSink* arrival_sink = nullptr;
  // Sum the routing model's expected selections of every routed expert over the run's steps
  // into RunOutput::expert_selections (the loads load-driven policies act on; recording only).
  bool expert_selections = false;
  bool chrome_trace = false;
  SimTime trace_start_ns = 0;
  SimTime trace_end_ns = 0;
  // > 0: every N-th step of every replica is also timed on the other fidelity (fidelity_check.h).
  int64_t fidelity_check_every = 0;
  // Stop the run once these SLO limits fail whatever the rest of it does (sim/metrics/
  // slo_watch.h; a search probe's early verdict): RunOutput::stopped_early says why. Watched only
  // where the requests the run can have are known at its start (open-loop workloads: synthetic
  // and trace kinds, not agent sessions).
  std::optional<SloWatchLimits> stop_on_certain_failure;
  // Stop the run at the first step end or arrival after *cancel turns true (set from another
  // thread; not owned): RunOutput::cancelled. What it outputs is the part that ran, for a caller
  // that no longer needs the run (a search's discarded speculative probe).
  const std::atomic<bool>* cancel = nullptr;
};

// One step's usage as the step model measured it: per GPU of the replica (same order as gpus) and
// its totals.
struct StepUsage {
  std::span<const GpuId> gpus;
  std::span<const SimTime> compute_ns, comm_ns, wait_ns;
  const StepTotals& totals;
};

class RunRecorder {
 public:
  // Policy-action instants kept in the Chrome trace at most.
  static constexpr size_t kMaxInstants = 100000;

  explicit RunRecorder(const RunOptions& options) : opt_(options) {}

  RunCounters& counters() { return counters_; }
  // GPU records are indexed by global GPU id: add them in id order.
  void add_gpu(const GpuRecord& record) { gpus_.push_back(record); }
  GpuRecord& gpu(int32_t global_gpu) { return gpus_[global_gpu]; }

  // Whether a step starting at `now` is in the Chrome-trace window; whether the next step is
  // recorded (--record, within record_max_steps).
  bool traces_step(SimTime now) const {
    return opt_.chrome_trace && now >= opt_.trace_start_ns && now < opt_.trace_end_ns;
  }
  bool keeps_step_series() const { return opt_.step_series || opt_.step_series_sink; }
  void add_series_row(const StepSeriesRow& row) {
    if (opt_.step_series_sink) {
      opt_.step_series_sink->add(row);
    } else {
      series_.push_back(row);
    }
  }
  bool records_step() const {
    return opt_.record_steps && static_cast<int64_t>(steps_.size()) < opt_.record_max_steps;
  }
  // Where a step's Chrome-trace slices go.
  std::vector<TraceSlice>* trace() { return &trace_; }

  // Counts an executed step and its per-GPU times and traffic.
  void on_step(const StepUsage& usage);
  // A policy action at `now`, counted by name and marked in the trace (instants are capped).
  void on_action(const std::string& name, int64_t n, SimTime now);

  // The placement the recorded steps start from (the step trace's header): replica
  // `replica_idx`'s MoE layer 0 (call once per replica, in replica order, before the first step).
  // Recorded steps compare each of its num_moe_layers layers with it.
  void set_initial_placement(int32_t replica_idx, const ExpertGpus& layer0, int32_t num_moe_layers);
  // A recorded step. `layers`: its replica's placement of every MoE layer when the step ran, when
  // it may have changed since the replica's last recorded step (null when it has not): the
  // layers that differ from the ones recorded last become changes at this step (one change for
  // every layer when they all moved to the same placement).
  void add_step(StepRecord record, const std::vector<ExpertGpus>* layers);

  // Per routed expert, the global GPUs hosting it in MoE layer 0 of any replica at the start.
  const ExpertGpus& initial_expert_gpus() const { return initial_; }
  // What the run output takes at the end (moved out).
  std::vector<GpuRecord>& gpus() { return gpus_; }
  std::vector<TraceSlice>& trace_slices() { return trace_; }
  std::vector<StepRecord>& steps() { return steps_; }
  std::vector<StepSeriesRow>& step_series() { return series_; }
  std::vector<PlacementChange>& placement_changes() { return changes_; }

 private:
  // Hands the slices collected so far to the trace sink, when there is one.
  void flush_trace();

  RunOptions opt_;
  int64_t num_instants_ = 0;
  RunCounters counters_;
  std::vector<GpuRecord> gpus_;
  std::vector<TraceSlice> trace_;
  std::vector<StepRecord> steps_;
  std::vector<StepSeriesRow> series_;
  ExpertGpus initial_;
  std::vector<std::vector<ExpertGpus>> recorded_placement_;  // per replica and MoE layer
  std::vector<PlacementChange> changes_;
};

}  // namespace moesim::sim
