// The simulator's step trace (docs/schemas/step_trace.md, `moesim.step_trace.v1`) read back for
// validation: the batch of every recorded step, per attention GPU, and its routing per MoE layer.
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "sim/core/time.h"

namespace moesim::sim {

struct TraceSequence {
  int32_t request = 0;
  int32_t gpu = 0;  // global GPU id of the attention rank
  bool prefill = false;
  int64_t new_tokens = 0;
  int64_t context_tokens = 0;
};

struct TraceLayer {
  int32_t layer_idx = 0;
  std::vector<std::array<int64_t, 4>> routing;  // [src GPU, expert, dst GPU, count], global ids
  double dispatch_bytes = 0;
  double combine_bytes = 0;
};

struct TraceStep {
  int64_t step = 0;
  int32_t replica = 0;
  SimTime start_ns = 0;
  SimTime end_ns = 0;
  std::vector<TraceSequence> sequences;
  std::vector<TraceLayer> layers;  // MoE layers only, in layer order
};

// A `placement` record: from step `step` of replica `replica` (every replica when -1) on, routed
// expert e of model layer `layer` (every MoE layer when -1) lives on the GPUs expert_gpus[e]
// (global ids; those outside a replica do not concern it).
struct TracePlacementChange {
  int32_t replica = -1;
  int64_t step = 0;
  int32_t layer = -1;
  std::vector<std::vector<int32_t>> expert_gpus;
};

struct StepTraceFile {
  std::string file;
  std::string scenario;
  std::string model;
  // The header's "overlap" (the schedule the steps were simulated with); "" when absent (traces
  // written before the key).
  std::string overlap;
  // The header's "comm_sms" (SMs the collectives held, docs/serving.md "SM sharing"); -1 when
  // absent (traces written before the key: the scenario's comm_sms applies).
  int32_t comm_sms = -1;
  int32_t num_gpus = 0;
  std::vector<std::vector<int32_t>> replica_gpus;       // replica -> global GPU ids
  std::vector<std::vector<int32_t>> expert_gpus;        // routed expert -> GPUs holding it
  std::vector<TraceStep> steps;                         // in file order
  std::vector<TracePlacementChange> placement_changes;  // in file order
};

// Reads a step trace. Throws ConfigError (FILE, line, field, reason) for malformed records,
// including a `placement` record whose expert count differs from the header's, that names a GPU
// outside the topology (or outside its replica), or that comes after a later step of its
// replica.
StepTraceFile read_step_trace(const std::string& path);
// Reads from a stream; `name` stands for the file in error messages.
StepTraceFile read_step_trace(std::istream& in, const std::string& name);

}  // namespace moesim::sim
