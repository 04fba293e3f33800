// The execution of one simulated GPU's share of steps on a backend, shared by the step replay
// (engine/replay.h) and the serving loop (engine/serve/). At construction it builds the GPU's
// synthetic weights for the chosen layers (its local experts: the most any placement of the
// deployment gives it) and buffers sized by `extents`; run_step() then plays one step's share of
// that GPU layer by layer, op by op, with routing forced from the step's per-layer counts
// (docs/schemas/step_trace.md, "What a rank replays").
//
// Two modes. Timed (the replay): every op is timed `repeats` times (more to replace runs other
// processes disturbed), after `warmup` untimed runs, and its measurement record goes to the
// writer. By default the runs are interleaved: `warmup` untimed rounds of the whole step, then
// timed rounds in which each op runs once, between the ops it runs between in a step; without
// interleaving each op's runs follow one another, warming its caches with its own data. Untimed
// (the serving loop): every op runs once and nothing is timed per op: the caller times whole steps.
// In both modes a multi-rank backend exchanges the step's tokens in real all-to-alls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "engine/measurement.h"
#include "engine/replay_plan.h"
#include "engine/step_trace.h"
#include "engine/timing.h"

namespace moesim::engine {

struct ExecutorOptions {
  bool timed = true;
  int warmup = 1;       // timed only: untimed runs of each op before timing (>= 0)
  int repeats = 3;      // timed only: timed runs of each op (>= 1)
  uint64_t seed = 1;    // root seed of the synthetic weights and activations
  TimingPolicy timing;  // timed only: estimator, noisy-run retries (engine/timing.h)
  // Timed only: time the step's ops in rounds, one run of each op per round, instead of every
  // run of an op back to back (GpuExecutor::run_step).
  bool interleave = true;
};

class Executor;

class GpuExecutor {
 public:
  // `deployment` gives the model, replicas and placements (its steps are not used) and must
  // outlive the executor; `extents` bound every step run_step() will be given (checked, aborting:
  // callers size them from the steps or the scheduler's limits). Records go to `writer` when not
  // null. Allocation failures propagate from the backend (OutOfMemoryError).
  GpuExecutor(Backend& backend, const StepTrace& deployment, const std::vector<LayerRun>& layers,
              const ReplayDtypes& dtypes, int32_t gpu, const GpuExtents& extents,
              const ExecutorOptions& options, MeasurementWriter* writer);
  ~GpuExecutor();
  GpuExecutor(const GpuExecutor&) = delete;
  GpuExecutor& operator=(const GpuExecutor&) = delete;

  // Plays the sequences of `step` whose attention runs on this GPU and this GPU's share of every
  // MoE layer's all-to-alls and experts. The step's replica must hold the GPU, except in a
  // multi-rank run, where every rank of the replica enters each layer's collectives.
  void run_step(const TraceStep& step);

  // Op and step records produced so far (written or not).
  int64_t num_op_records() const;
  int64_t num_step_records() const;

 private:
  std::unique_ptr<Executor> impl_;
};

// Vocabulary columns of the output head on `gpu`: vocab / attention_tp of its replica (the
// simulator's StepModel splits the head the same way), 0 when the trace has no vocabulary.
int64_t lm_head_vocab(const StepTrace& trace, int32_t gpu);

}  // namespace moesim::engine
