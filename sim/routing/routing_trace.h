// Routing traces: recorded selections per (step, MoE layer, source GPU, expert), in the JSONL
// format of docs/schemas/routing_trace.md (a header line, then one record per step and layer,
// dense or sparse). The reader validates every line (ConfigError "file:line: key: reason");
// RecordingRoutingModel writes a trace while another model routes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "sim/routing/count_matrix.h"
#include "sim/routing/routing_model.h"

namespace moesim::sim {

inline constexpr const char* kRoutingTraceFormat = "moesim-routing-trace";
inline constexpr int kRoutingTraceVersion = 1;

struct RoutingTraceHeader {
  int32_t num_moe_layers = 0;  // >= 1
  int32_t num_experts = 0;     // >= 1
  int32_t num_src_gpus = 0;    // >= 1
  int32_t top_k = 0;           // 1..num_experts
};

// A whole trace in memory: steps 0..num_steps-1, each with every MoE layer.
struct RoutingTrace {
  std::string file;  // where it was read from (for errors)
  RoutingTraceHeader header;
  int64_t num_steps = 0;
  std::vector<CountMatrix> counts;  // index step * num_moe_layers + layer; num_src x num_experts

  const CountMatrix& at(int64_t step_idx, int32_t moe_layer_idx) const {
    return counts[static_cast<size_t>(step_idx) * header.num_moe_layers + moe_layer_idx];
  }
};

// Reads and validates a trace; `file_name` names it in errors. Throws ConfigError
// "file:line: key: reason" for a malformed line, a count that breaks the header's shape or top-k
// (row sum != tokens * top_k, a cell above tokens), records out of order, or missing layers.
RoutingTrace read_routing_trace(std::istream& in, const std::string& file_name);
// Opens and reads `path`; an unreadable file is a ConfigError.
RoutingTrace load_routing_trace(const std::string& path);

// Writes a trace to a stream it does not own. Records must come in (step, layer) order: steps
// 0, 1, ... each with layers 0..num_moe_layers-1 (checked). Each record is written sparse when
// fewer than a third of its cells are non-zero, dense otherwise.
class RoutingTraceWriter {
 public:
  RoutingTraceWriter(std::ostream& out, const RoutingTraceHeader& header);
  // Precondition: src_expert is num_src_gpus x num_experts with rows that are whole tokens
  // (row sum divisible by top_k, no cell above row sum / top_k).
  void write(int64_t step_idx, int32_t moe_layer_idx, const CountMatrix& src_expert);
  int64_t num_records() const { return num_records_; }

 private:
  std::ostream& out_;
  RoutingTraceHeader header_;
  int64_t num_records_ = 0;
};

// Routes with `inner` and writes every route() result to `writer` (both not owned; must outlive
// this). route_to_gpus() goes through route() so that it is recorded too: recording gives up
// the multinomial-over-destinations fast path. Queries must come in trace order.
class RecordingRoutingModel final : public RoutingModel {
 public:
  RecordingRoutingModel(RoutingModel& inner, RoutingTraceWriter& writer)
      : inner_(inner), writer_(writer) {}
  const RoutingShape& shape() const override { return inner_.shape(); }
  void route(const RoutingQuery& query, CountMatrix& out) override;

 private:
  RoutingModel& inner_;
  RoutingTraceWriter& writer_;
};

}  // namespace moesim::sim
