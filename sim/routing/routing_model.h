// The routing model interface: which experts the tokens of one MoE layer pick, per step.
//
// The result is a count of selections (token, expert pairs) per (source GPU, expert): each token
// contributes top_k selections of distinct experts, so row s sums to tokens_per_src[s] * top_k
// and no cell exceeds tokens_per_src[s]. Implementations: SyntheticRoutingModel (skew models)
// and ReplayRoutingModel (a recorded trace).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/routing/count_matrix.h"
#include "sim/routing/routing_spec.h"

namespace moesim::sim {

struct RoutingQuery {
  int64_t step_idx = 0;       // >= 0
  int32_t moe_layer_idx = 0;  // in [0, num_moe_layers)
  // Tokens per source GPU (>= 0); its size is the number of sources.
  std::span<const int32_t> tokens_per_src;
  // Optional split by domain tag: num_src x num_domains, row-major, row s summing to
  // tokens_per_src[s]. Empty: every source's tokens follow the spec's domain weights.
  std::span<const int32_t> tokens_per_src_domain;
  // route_totals_to_gpus() only; 0: draw every destination's total. In (0, 1): a model may draw
  // only the destinations that can receive the most selections and give the others their
  // expectation, where the chance that one of those others would have received at least as many
  // as the likeliest destination is at most this (SyntheticRoutingModel: CandidateMultinomial,
  // docs/fast_fidelity.md, "Candidate draw").
  double candidate_epsilon = 0;
  // route_to_gpus() / route_totals_to_gpus(): the version of the placement gpu_of_expert comes
  // from (sim/core/state_version.h), where the caller knows it; 0: unknown. A model may take an
  // equal non-zero version for an unchanged placement.
  uint64_t placement_version = 0;
};

class RoutingModel {
 public:
  virtual ~RoutingModel() = default;

  virtual const RoutingShape& shape() const = 0;

  // Selections per (source GPU, expert): resets `out` to num_src x num_experts and fills it
  // (see the file comment for the row sums). `out` is reused: no allocation once it has grown.
  virtual void route(const RoutingQuery& query, CountMatrix& out) = 0;

  // Selections per (source GPU, destination GPU) when expert e is served by
  // gpu_of_expert[e] in [0, num_dst_gpus) (one replica per expert; for replicas use route() and
  // the placement's dispatch). Row sums as route(). The default aggregates route() and is
  // exactly its distribution; SyntheticRoutingModel overrides it with a multinomial over
  // destinations (docs/routing.md, "fast path").
  virtual void route_to_gpus(const RoutingQuery& query, std::span<const int32_t> gpu_of_expert,
                             int32_t num_dst_gpus, CountMatrix& out);

  // The column sums of route_to_gpus() without the per-source matrix (the fast fidelity): `totals`
  // is resized to num_dst_gpus and holds each destination's selections of the layer. Returns
  // false, leaving `totals` unspecified, when the model cannot draw them directly (callers then
  // use route_to_gpus()). An implementation draws the same distribution of totals as
  // route_to_gpus(), or states where it does not.
  virtual bool route_totals_to_gpus(const RoutingQuery& query,
                                    std::span<const int32_t> gpu_of_expert, int32_t num_dst_gpus,
                                    std::vector<int64_t>& totals) {
    return false;
  }

  // route()'s column sums the same way: selections per expert over all sources (num_experts
  // entries); false where the model cannot draw them directly.
  virtual bool route_expert_totals(const RoutingQuery& query, std::vector<int64_t>& totals) {
    return false;
  }

  // Whether route_to_gpus() returns the destinations the selections actually ran on, replicas
  // included (a recording): callers with replicated experts then use it instead of dispatching
  // route()'s selections over the replicas.
  virtual bool reports_destinations() const { return false; }

  // Expected selections per token of every expert at (step, layer) (num_experts entries summing
  // to top_k), the load the serving policies act on: a synthetic model's selection shares of its
  // first domain, a replay's recorded per-expert totals per recorded token. Valid until the next
  // call on this model. Empty when the model has no such expectation.
  virtual std::span<const double> expected_shares(int32_t moe_layer_idx, int64_t step_idx) {
    return {};
  }
  // A version of expected_shares(moe_layer_idx, step_idx) (sim/core/state_version.h): equal
  // versions mean equal shares, so callers may keep what they derived from them; 0 (the
  // default) when the model does not say.
  virtual uint64_t expected_shares_version(int32_t moe_layer_idx, int64_t step_idx) { return 0; }

 private:
  CountMatrix per_expert_scratch_;
};

// Sums the columns of src_expert into destination GPUs: out(s, gpu_of_expert[e]) +=
// src_expert(s, e). Resets `out` to num_src x num_dst_gpus.
void aggregate_to_gpus(const CountMatrix& src_expert, std::span<const int32_t> gpu_of_expert,
                       int32_t num_dst_gpus, CountMatrix& out);

}  // namespace moesim::sim
