// ReplayRoutingModel: routing read back from a recorded trace (routing_trace.h).
//
// Step i replays the trace's step (i mod num_steps), so a short trace can drive a long run.
// When the query's tokens of a source equal the recorded ones, the recorded row is returned as
// is. Otherwise the row is rescaled deterministically to the query's tokens * top_k: the
// recorded counts (or, for a source with no recorded tokens, the layer's recorded per-expert
// totals) are scaled proportionally, capped at the query's tokens per expert, and rounded by
// largest remainder (ties to the lower expert index). No randomness is involved.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/routing/routing_model.h"
#include "sim/routing/routing_trace.h"

namespace moesim::sim {

class ReplayRoutingModel final : public RoutingModel {
 public:
  // Throws ConfigError (naming trace.file) when the trace's header disagrees with the shape
  // (MoE layers, experts, top_k) or with num_src_gpus.
  ReplayRoutingModel(RoutingTrace trace, const RoutingShape& shape, int32_t num_src_gpus);

  const RoutingShape& shape() const override { return shape_; }
  // Precondition: query.tokens_per_src has num_src_gpus entries; the domain split is ignored
  // (the trace already reflects the recorded domains).
  void route(const RoutingQuery& query, CountMatrix& out) override;

  // The recorded step's (i mod num_steps) per-expert selections / its recorded tokens (all
  // sources); all zeros for a step that recorded no token.
  std::span<const double> expected_shares(int32_t moe_layer_idx, int64_t step_idx) override;

  const RoutingTrace& trace() const { return trace_; }

 private:
  void rescale_row(std::span<const int32_t> recorded, int64_t recorded_tokens, int32_t tokens,
                   std::span<int32_t> out);

  RoutingTrace trace_;
  RoutingShape shape_;
  std::vector<int64_t> layer_totals_;
  std::vector<double> weights_;
  std::vector<double> exact_;
  std::vector<int32_t> order_;
  std::vector<double> shares_;
};

}  // namespace moesim::sim
