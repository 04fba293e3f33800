// The replay loop: GPU by GPU, step by step, layer by layer, op by op.
#include "engine/replay.h"

#include <algorithm>
#include <limits>

#include "base/check.h"
#include "engine/gpu_executor.h"
#include "engine/input_error.h"
#include "engine/replay_plan.h"

namespace moesim::engine {

namespace {

// Whether `gpu` plays `step`: multi-rank, every step of the ranks' replica; single rank, the
// steps of the replica holding the GPU.
bool plays_step(const StepTrace& trace, const TraceStep& step, int32_t gpu,
                int64_t multi_rank_replica) {
  if (multi_rank_replica >= 0) return step.replica_idx == multi_rank_replica;
  for (const TraceReplica& r : trace.replicas) {
    if (r.replica_idx == step.replica_idx) {
      return std::find(r.gpus.begin(), r.gpus.end(), gpu) != r.gpus.end();
    }
  }
  MOESIM_CHECK(false, "step replica validated by the reader");
  return false;
}

// The replica a multi-rank replay plays (checked against the options and the rank count).
const TraceReplica& ranks_replica(const StepTrace& trace, const ReplayOptions& options,
                                  int world_size) {
  if (!options.gpus.empty()) {
    throw InputError("--gpus/--ranks choose the GPUs of a single-rank replay; with " +
                     std::to_string(world_size) + " ranks, rank r plays GPU r of the replica");
  }
  const TraceReplica* replica = &trace.replicas.front();
  if (options.replica_idx >= 0) {
    replica = nullptr;
    std::string valid;
    for (const TraceReplica& r : trace.replicas) {
      if (r.replica_idx == options.replica_idx) replica = &r;
      valid += (valid.empty() ? "" : ", ") + std::to_string(r.replica_idx);
    }
    if (replica == nullptr) {
      throw InputError("--replica " + std::to_string(options.replica_idx) + ": " + trace.file +
                       " has no such replica (replicas: " + valid + ")");
    }
  }
  if (static_cast<int>(replica->gpus.size()) != world_size) {
    throw InputError(trace.file + ": topology mismatch: replica " +
                     std::to_string(replica->replica_idx) + " has " +
                     std::to_string(replica->gpus.size()) + " GPUs but " +
                     std::to_string(world_size) + " ranks are running (one rank per GPU)");
  }
  return *replica;
}

}  // namespace

MeasurementHeader make_replay_header(const Backend& backend, const StepTrace& trace,
                                     const ReplayOptions& options, const ReplaySummary& summary) {
  MeasurementHeader header;
  header.backend = backend.name();
  header.device = backend.device_name();
  header.peaks = backend.peaks();
  header.engine_version = options.engine_version;
  header.trace_file = trace.file;
  header.scenario = trace.scenario;
  header.model = trace.model.name;
  header.replay_profile = options.layers;
  header.layers_run = summary.layers;
  header.sim_gpus = summary.gpus;
  header.warmup = options.warmup;
  header.repeats = options.repeats;
  header.seed = options.seed;
  header.estimator = std::string(estimator_name(options.timing.estimator));
  header.max_wait_fraction = options.timing.max_wait_fraction;
  header.max_extra_runs =
      options.timing.max_extra_runs < 0 ? options.repeats : options.timing.max_extra_runs;
  header.pinned = options.timing.pinned;
  header.interleaved = options.interleave;
  return header;
}

ReplaySummary replay_trace(Backend& backend, const StepTrace& trace, const ReplayOptions& options,
                           MeasurementWriter& writer) {
  if (options.repeats < 1) throw InputError("--repeats must be >= 1");
  if (options.warmup < 0) throw InputError("--warmup must be >= 0");
  ReplaySummary summary;
  summary.layers = select_layers(options.layers, trace.model);
  const TraceReplica* multi_rank_replica = nullptr;
  if (backend.world_size() > 1) {
    multi_rank_replica = &ranks_replica(trace, options, backend.world_size());
    summary.gpus = {multi_rank_replica->gpus[backend.rank()]};
  } else {
    summary.gpus = select_gpus(trace, options.gpus);
  }
  const ReplayDtypes dtypes = resolve_dtypes(trace.model.dtypes, backend, options.expert_dtype);
  summary.num_steps = static_cast<int64_t>(trace.steps.size());
  if (options.max_steps >= 0) summary.num_steps = std::min(summary.num_steps, options.max_steps);

  writer.write_header(make_replay_header(backend, trace, options, summary));

  for (int32_t gpu : summary.gpus) {
    const ReplayMemoryPlan plan = plan_memory(trace, summary.layers, gpu, dtypes);
    // hidden x vocab x element bytes: within int64 by the reader's bounds (2^17 x 2^22 x 4).
    const int64_t head_bytes =
        trace.model.hidden_size * lm_head_vocab(trace, gpu) * dtype_size_bytes(dtypes.activations);
    const MemoryInfo mem = backend.memory_info();
    int64_t needed_bytes = 0;
    if (__builtin_add_overflow(plan.total_bytes(), head_bytes, &needed_bytes)) {
      needed_bytes = std::numeric_limits<int64_t>::max();
    }
    if (needed_bytes > mem.available_bytes) {
      throw OutOfMemoryError("the replay of simulated GPU " + std::to_string(gpu) + " (weights " +
                                 std::to_string(plan.weight_bytes) + " B, output head " +
                                 std::to_string(head_bytes) + " B, caches " +
                                 std::to_string(plan.cache_bytes) + " B, activations " +
                                 std::to_string(plan.activation_bytes) + " B)",
                             needed_bytes, mem.available_bytes);
    }
    const ExecutorOptions executor_options{true,         options.warmup, options.repeats,
                                           options.seed, options.timing, options.interleave};
    GpuExecutor executor(backend, trace, summary.layers, dtypes, gpu, gpu_extents(trace, gpu),
                         executor_options, &writer);
    const int64_t replica = multi_rank_replica != nullptr ? multi_rank_replica->replica_idx : -1;
    for (int64_t i = 0; i < summary.num_steps; ++i) {
      if (plays_step(trace, trace.steps[i], gpu, replica)) executor.run_step(trace.steps[i]);
    }
    summary.num_op_records += executor.num_op_records();
    summary.num_step_records += executor.num_step_records();
  }
  return summary;
}

}  // namespace moesim::engine
