// A RoutingModel that serves the routing a step trace recorded, so that validation re-simulates
// exactly the steps the engine measured: query (step_idx, moe_layer_idx) returns the recorded
// selections per (source GPU, expert) or per (source GPU, destination GPU), on replica-local
// GPU indices.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "sim/calibration/step_trace_reader.h"
#include "sim/routing/routing_model.h"

namespace moesim::sim {

class RecordedRoutingModel final : public RoutingModel {
 public:
  // Routing of `replica`'s steps in `trace`; `moe_layer_of_layer[l]` is the MoE index of model
  // layer l (-1 for dense layers). Throws ConfigError (naming the trace) for a routing entry on a
  // GPU outside the replica, an expert out of range or a layer that is not an MoE layer.
  RecordedRoutingModel(const StepTraceFile& trace, int32_t replica, const RoutingShape& shape,
                       const std::vector<int32_t>& moe_layer_of_layer);

  const RoutingShape& shape() const override { return shape_; }
  // The recorded routing of the query's step and MoE layer. The trace is bad input (ConfigError
  // naming the trace, step and layer) when it recorded no routing for a step and MoE layer the
  // re-simulation runs, or when a source GPU's recorded selections differ from its tokens x top_k
  // (a routing cell missing or extra): the reader cannot know the tokens per source GPU, the
  // query does. Precondition (checked): the query has one token count per replica GPU.
  void route(const RoutingQuery& query, CountMatrix& out) override;
  // The recorded destinations (the experts' replicas that actually ran), not `gpu_of_expert`.
  void route_to_gpus(const RoutingQuery& query, std::span<const int32_t> gpu_of_expert,
                     int32_t num_dst_gpus, CountMatrix& out) override;
  bool reports_destinations() const override { return true; }

 private:
  struct Recorded {
    CountMatrix src_expert;
    CountMatrix src_dst;
  };
  const Recorded& find(const RoutingQuery& query) const;

  std::string file_;  // the trace, for errors
  RoutingShape shape_;
  int32_t num_gpus_ = 0;
  std::map<std::pair<int64_t, int32_t>, Recorded> steps_;  // (step, moe layer) -> counts
};

}  // namespace moesim::sim
