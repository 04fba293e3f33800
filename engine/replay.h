// Replay of a step trace on one backend: for each selected simulated GPU, build that GPU's
// weights for the selected layers, then play every step's share of that GPU ("What a rank
// replays" in docs/schemas/step_trace.md) with routing forced from the trace, timing each
// operation and writing measurement records (docs/schemas/measurement.md). A GPU plays only the
// steps of its own replica. With several ranks each plays one GPU of one replica and the
// all-to-alls are real, measured collectives, so N ranks write the records of N single-rank
// replays; with one rank they are recorded as not measured. docs/engine.md ("Multi-rank
// replays").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/measurement.h"
#include "engine/step_trace.h"
#include "engine/timing.h"

namespace moesim::engine {

struct ReplayOptions {
  std::vector<int32_t> gpus;   // simulated GPUs to play; empty = select_gpus() default
  std::string layers = "all";  // replay profile (engine/replay_plan.h)
  int warmup = 1;              // untimed runs of each op before timing (>= 0)
  int repeats = 3;             // clean timed runs of each op wanted (>= 1)
  uint64_t seed = 1;           // root seed of synthetic weights and activations
  std::string expert_dtype;    // "" = from the trace; "bf16" or "fp8" overrides
  int64_t max_steps = -1;      // replay only the first max_steps steps; -1 = all
  std::string engine_version;  // written to the header
  int64_t replica_idx = -1;    // multi-rank only: the replica whose GPUs the ranks play; -1 =
                               // the trace's first replica
  TimingPolicy timing;         // estimator, noisy-sample retries, pinning (engine/timing.h)
  bool interleave = true;      // time the ops in rounds of the whole step (engine/gpu_executor.h)
};

struct ReplaySummary {
  std::vector<int32_t> gpus;
  std::vector<LayerRun> layers;
  int64_t num_steps = 0;  // steps replayed per GPU
  int64_t num_op_records = 0;
  int64_t num_step_records = 0;
};

// Replays `trace` and writes the header and all records to `writer`. Throws InputError when the
// trace does not fit the options (unknown layers or GPUs, unsupported dtypes, a replica whose GPU
// count differs from the number of ranks, GPUs chosen for a multi-rank replay) and
// OutOfMemoryError when a GPU's plan (weights + caches + activations) exceeds the backend's
// available memory, before allocating anything for that GPU.
ReplaySummary replay_trace(Backend& backend, const StepTrace& trace, const ReplayOptions& options,
                           MeasurementWriter& writer);

// The header replay_trace writes for a replay on `backend` that played summary.gpus and
// summary.layers.
MeasurementHeader make_replay_header(const Backend& backend, const StepTrace& trace,
                                     const ReplayOptions& options, const ReplaySummary& summary);

}  // namespace moesim::engine
