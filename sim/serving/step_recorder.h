// What the run records of a replica's steps (internal to sim/serving): TraceObserver appends a
// step's GPU slices to the Chrome trace; RecordObserver fills a StepRecord's per-expert routing
// for the step trace (docs/schemas/step_trace.md); StepRecording sets them up for a step and, once
// it is timed, counts its usage and adds its step-series row and step record.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim/core/id_window.h"
#include "sim/core/rng.h"
#include "sim/core/simulation.h"
#include "sim/core/time.h"
#include "sim/metrics/run_recorder.h"
#include "sim/placement/layer_placements.h"
#include "sim/routing/count_matrix.h"
#include "sim/routing/routing_model.h"
#include "sim/serving/replica.h"
#include "sim/serving/replica_scheduler.h"
#include "sim/serving/sequence.h"
#include "sim/serving/step_model.h"

namespace moesim::sim::detail {

// Appends the step's slices on replica `replica_idx`'s GPUs (global ids `gpus`), shifted by the
// step's start, to `out`.
class TraceObserver final : public StepObserver {
 public:
  TraceObserver(std::vector<TraceSlice>* out, int32_t replica_idx, std::span<const GpuId> gpus,
                SimTime start)
      : out_(out), replica_idx_(replica_idx), gpus_(gpus), start_(start) {}
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override;
  // Marks the slice just appended (its on_slice() precedes this call).
  void on_sm_sharing(int32_t gpu_idx, int32_t layer_idx, SimTime lost_ns, double sm_share) override;

 private:
  std::vector<TraceSlice>* out_;
  int32_t replica_idx_;
  std::span<const GpuId> gpus_;
  SimTime start_;
};

// Records per-expert routing for the step trace: splits each (src, dst GPU) selection count
// over the destination's experts by the routing model's expected shares (equal shares when it
// states none), from its own RNG stream, so that recording never changes the simulation.
class RecordObserver final : public StepObserver {
 public:
  RecordObserver(StepRecord* rec, std::span<const GpuId> gpus, const LayerPlacements* placements,
                 RoutingModel* routing, RngStream& rng)
      : rec_(rec), gpus_(gpus), placements_(placements), routing_(routing), rng_(rng) {}
  StepObserver* chained = nullptr;
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    if (chained) chained->on_slice(gpu_idx, name, layer_idx, start_ns, duration_ns);
  }
  void on_sm_sharing(int32_t gpu_idx, int32_t layer_idx, SimTime lost_ns,
                     double sm_share) override {
    if (chained) chained->on_sm_sharing(gpu_idx, layer_idx, lost_ns, sm_share);
  }
  void on_routing(int32_t layer_idx, int32_t moe_layer_idx, const CountMatrix& src_dst,
                  double dispatch_bytes, double combine_bytes) override;

 private:
  StepRecord* rec_;
  std::span<const GpuId> gpus_;
  const LayerPlacements* placements_;
  RoutingModel* routing_;
  RngStream& rng_;
};

// Whether the Chrome trace shows replica `replica_idx` (`traced`: the scenario's
// outputs.trace_replicas, empty: all).
bool traces_replica(const std::vector<int32_t>& traced, int32_t replica_idx);

class StepRecording {
 public:
  // References must outlive this object.
  StepRecording(RunRecorder& recorder, Simulation& sim, const IdWindow<Seq>& seqs,
                const std::vector<int32_t>& traced);

  // The observer of r's step starting now (null: nothing observed), valid until finish().
  StepObserver* begin(const Replica& r);
  // After r's step was timed as `res` for `batch`: its usage, step-series row and step record.
  void finish(Replica& r, const ScheduledBatch& batch, const StepResult& res);

 private:
  void add_series_row(const Replica& r, const ScheduledBatch& batch, const StepResult& res);
  void record_step(Replica& r, SimTime duration_ns);

  RunRecorder& recorder_;
  Simulation& sim_;
  const IdWindow<Seq>& seqs_;
  const std::vector<int32_t>& traced_;
  std::optional<TraceObserver> tracer_;
  std::optional<RecordObserver> step_recorder_;
  StepRecord rec_;
  bool record_ = false;
};

}  // namespace moesim::sim::detail
