// Reading step traces (docs/schemas/step_trace.md, schema "moesim.step_trace.v1") into plain
// structs. The reader checks syntax, types and the schema's invariants (indices in range, routed
// counts summing to top_k times the source GPU's tokens, destinations holding the expert, ...).
// Every error is an InputError "FILE:LINE: FIELD: reason", FIELD a JSON path within the record
// (e.g. "layers[0].routing[3][1]").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/trace_header.h"

namespace moesim::engine {

inline constexpr std::string_view kStepTraceSchema = "moesim.step_trace.v1";

enum class Phase { kPrefill, kDecode };

struct TraceSequence {
  int64_t request_id = 0;
  int32_t gpu = 0;
  Phase phase = Phase::kPrefill;
  int64_t new_tokens = 0;
  int64_t context_tokens = 0;
};

struct RoutingEntry {
  int32_t src_gpu = 0;
  int32_t expert = 0;
  int32_t dst_gpu = 0;
  int64_t count = 0;
};

struct TraceMoeLayer {
  int64_t layer_idx = 0;
  std::vector<RoutingEntry> routing;
  int64_t dispatch_bytes = 0;
  int64_t combine_bytes = 0;
};

struct TraceStep {
  int64_t line = 0;  // line of the record in the file (1-based)
  int64_t step_idx = 0;
  int64_t replica_idx = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<TraceSequence> sequences;
  std::vector<TraceMoeLayer> moe_layers;  // one per MoE layer, in layer order
  int64_t sim_step_ns = 0;

  // Tokens computed this step by sequences whose attention runs on `gpu`.
  int64_t tokens_on_gpu(int32_t gpu) const;
  // The entry of MoE layer `layer_idx`, or nullptr.
  const TraceMoeLayer* moe_layer(int64_t layer_idx) const;
};

struct StepTrace {
  std::string file;
  std::string moesim_version;
  std::string scenario;
  uint64_t seed = 0;
  // The overlap schedule the simulator ran ([deployment] overlap; "none" when the header has
  // none). The engine replays every layer's ops in sequence whatever it is.
  std::string overlap = "none";
  TraceModel model;
  TraceTopology topology;
  std::vector<TraceReplica> replicas;
  // The header's placement first, then placement records (ascending from_step per replica).
  std::vector<TracePlacement> placements;
  std::vector<TraceStep> steps;  // file order

  // The placement in force at step `step_idx` of replica `replica_idx` in MoE layer `layer_idx`:
  // the last placement record for that replica (or for all replicas) and that layer (or for all
  // layers) from that step or earlier.
  const TracePlacement& placement_at(int64_t replica_idx, int64_t step_idx,
                                     int64_t layer_idx) const;
};

// Reads and validates a trace file. Throws InputError (see above); a missing file is
// "FILE: cannot open".
StepTrace read_step_trace(const std::string& path);
// Parses trace text; `file_name` is used in messages.
StepTrace parse_step_trace(std::string_view text, const std::string& file_name);

}  // namespace moesim::engine
