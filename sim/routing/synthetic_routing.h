// SyntheticRoutingModel: routing drawn from the skew models of a RoutingSpec. What it draws per
// MoE layer (drift epochs, per-domain popularity and selection shares, co-activation clusters) is
// the model's and its traffic's and lives in a SyntheticPopularity the replicas share; each call's
// draws come from a stream of the model's own seed named after (layer, step) only, so a result
// depends on the seeds, spec, shape, step, layer and tokens, never on the order of calls. Per-token
// top-k sets, or counts from the shares (capped multinomial per source, or once per layer and
// split by systematic rounding). docs/routing.md ("Replicas", "Sampling") has the streams and
// the sampling modes in full.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/core/distributions.h"
#include "sim/core/rng.h"
#include "sim/routing/count_draws.h"
#include "sim/routing/routing_model.h"
#include "sim/routing/routing_spec.h"
#include "sim/routing/synthetic_popularity.h"
#include "sim/routing/token_sampler.h"

namespace moesim::sim {

class SyntheticRoutingModel final : public RoutingModel {
 public:
  // A model with a popularity of its own, drawn from `seed` (also its draw seed). Preconditions
  // as SyntheticPopularity's.
  SyntheticRoutingModel(const RoutingShape& shape, RoutingSpec spec, uint64_t seed);
  // A model drawing from `draw_seed` on a popularity it shares (not null).
  SyntheticRoutingModel(std::shared_ptr<SyntheticPopularity> popularity, uint64_t draw_seed);
  ~SyntheticRoutingModel() override;

  const RoutingShape& shape() const override { return shape_; }
  const RoutingSpec& spec() const { return spec_; }
  const std::shared_ptr<SyntheticPopularity>& shared_popularity() const { return popularity_; }

  void route(const RoutingQuery& query, CountMatrix& out) override;
  void route_to_gpus(const RoutingQuery& query, std::span<const int32_t> gpu_of_expert,
                     int32_t num_dst_gpus, CountMatrix& out) override;
  // The totals route_to_gpus() draws before splitting them over sources: under kMargins the same
  // draws from the same stream (route_to_gpus()'s column sums differ from them only by its
  // systematic rounding, less than one selection per source and destination); under kCounts the
  // same distribution (a sum of multinomials with one share vector is one multinomial); sources
  // that kPerToken / kAuto would draw token by token are drawn as counts (selections of one token
  // are distinct experts, which counts ignore: docs/fast_fidelity.md). With query.candidate_epsilon
  // > 0 and one share row (no domain split), where some destinations can be bounded away, only
  // the likeliest destinations are drawn and the others get what is left by share
  // (CandidateMultinomial, from the same stream; docs/fast_fidelity.md, "Candidate draw").
  bool route_totals_to_gpus(const RoutingQuery& query, std::span<const int32_t> gpu_of_expert,
                            int32_t num_dst_gpus, std::vector<int64_t>& totals) override;
  // The same for route(): selections per expert over all sources, no expert above the layer's
  // tokens (route()'s margins totals).
  bool route_expert_totals(const RoutingQuery& query, std::vector<int64_t>& totals) override;

  // Exact per-token expert sets of num_tokens tokens of domain domain_idx at (step, layer), for
  // activation profiles: experts_out is resized to num_tokens * top_k (token t owns
  // [t * top_k, (t + 1) * top_k)). Draws from its own stream; does not change route()'s results.
  void sample_token_experts(int64_t step_idx, int32_t moe_layer_idx, int32_t domain_idx,
                            int32_t num_tokens, std::vector<int32_t>& experts_out);

  // The epoch index of a step for a layer (0 without drift), and the first step of that epoch.
  int64_t epoch_of(int32_t moe_layer_idx, int64_t step_idx);
  int64_t epoch_start_step(int32_t moe_layer_idx, int64_t epoch_idx);

  // Popularity (sums to 1) and expected selections per token pi (sums to top_k) of one domain at
  // (layer, step). Valid until the next call on this model.
  std::span<const double> popularity(int32_t moe_layer_idx, int64_t step_idx, int32_t domain_idx);
  std::span<const double> selection_shares(int32_t moe_layer_idx, int64_t step_idx,
                                           int32_t domain_idx);
  // selection_shares of domain 0.
  std::span<const double> expected_shares(int32_t moe_layer_idx, int64_t step_idx) override {
    return selection_shares(moe_layer_idx, step_idx, 0);
  }
  // New whenever the layer's popularity is drawn again (a new drift epoch).
  uint64_t expected_shares_version(int32_t moe_layer_idx, int64_t step_idx) override;
  // Co-activation cluster of each expert in a layer (empty when the layer has none).
  std::span<const int32_t> clusters(int32_t moe_layer_idx) const;

 private:
  struct LayerState;

  LayerState& layer_at(int32_t moe_layer_idx, int64_t step_idx);
  TokenSampler& sampler(LayerState& layer, int32_t domain_idx);
  bool per_token_for(int32_t num_tokens) const;
  // Whether a source with num_tokens tokens is drawn by the margins pass.
  bool margins_for(int32_t num_tokens) const;
  // Adds n tokens' counts drawn from shares pi (sum top_k) to row: kCounts's per-source draw.
  void draw_counts(RngStream& rng, int32_t n, std::span<const double> pi, std::span<int32_t> row);
  // One row's totals into counts_scratch_: num_tokens x top_k selections over `shares`, no
  // column above num_tokens when cap_per_column (capped_multinomial); uncapped rows draw from
  // `prepared` (the same draws) when given.
  void draw_row_totals(RngStream& rng, int64_t num_tokens, std::span<const double> shares,
                       bool cap_per_column, const PreparedMultinomial* prepared);
  // Multinomial(n, shares) into counts_scratch_, from `prepared` (shares prepared) when given.
  void draw_multinomial(RngStream& rng, int64_t n, std::span<const double> shares,
                        const PreparedMultinomial* prepared);
  // The margins pass over the sources that use it (see SamplingMode::kMargins); `prepared`: one
  // per row of `shares`, or empty.
  void margins_pass(RngStream& rng, const RoutingQuery& query, int32_t num_rows,
                    std::span<const double> shares, bool cap_per_column,
                    std::span<const PreparedMultinomial> prepared, CountMatrix& out);
  // Adds n tokens' exact per-token selections to row, per expert or (gpu_of_expert non-empty)
  // per destination GPU.
  void draw_tokens(RngStream& rng, LayerState& layer, int32_t domain_idx, int32_t n,
                   std::span<const int32_t> gpu_of_expert, std::span<int32_t> row);
  // Destination shares into layer.gpu_shares: num_rows (1 for the domain mix, or one per
  // domain) x num_dst_gpus. Returns whether the layer's shares were kept from its last call.
  bool fill_gpu_shares(LayerState& layer, std::span<const int32_t> gpu_of_expert,
                       uint64_t placement_version, int32_t num_dst_gpus, int32_t num_rows);
  // The kept shares' prepared multinomials (one per row), built on first use; none when the
  // shares were not `kept` (fill_gpu_shares' result).
  std::span<const PreparedMultinomial> kept_gpu_draws(LayerState& layer, bool kept);
  // Totals of the margins pass (one multinomial per row of `shares`, capped per column or not)
  // into `totals` (one per column), as margins_pass draws them before its systematic split.
  void draw_totals(RngStream& rng, const RoutingQuery& query, int32_t num_rows,
                   std::span<const double> shares, bool cap_per_column,
                   std::span<const PreparedMultinomial> prepared, std::vector<int64_t>& totals);
  // Splits the tokens of source s by domain into domain_tokens_.
  void split_domains(RngStream& rng, const RoutingQuery& query, int32_t src_idx);

  std::shared_ptr<SyntheticPopularity> popularity_;
  const RoutingShape& shape_;
  const RoutingSpec& spec_;
  uint64_t draw_seed_;
  std::vector<LayerState> layers_;
  // Hot-path scratch.
  std::vector<int64_t> counts_scratch_;
  CappedMultinomialScratch capped_scratch_;
  std::vector<double> gpu_shares_scratch_;
  std::vector<double> column_shares_;
  std::vector<int32_t> token_scratch_;
  std::vector<int64_t> domain_tokens_;
};

}  // namespace moesim::sim
