// SyntheticPopularity: what a synthetic routing model draws per MoE layer from its popularity seed
// (synthetic_routing.h), in an object several models may share: the replicas of one deployment
// route on one (docs/routing.md, "Replicas").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sim/core/distributions.h"
#include "sim/core/rng.h"
#include "sim/routing/routing_spec.h"

namespace moesim::sim {

// The layers' skew, clusters, drift epochs and, per epoch, each domain's popularity and selection
// shares (and the destination shares of each expert-to-GPU map in use, with their prepared
// draws), all from `seed` alone. Models holding one share what they compute: a model with its own
// copy from the same seed draws exactly the same routing (tests/sim/routing/
// synthetic_routing_test.cc). Not thread-safe: the models sharing one run on one thread.
class SyntheticPopularity {
 public:
  // Preconditions: shape valid (validate_routing_shape) and spec valid for it
  // (validate_routing_spec); both checked, as invariants.
  SyntheticPopularity(const RoutingShape& shape, RoutingSpec spec, uint64_t seed);
  ~SyntheticPopularity();
  SyntheticPopularity(const SyntheticPopularity&) = delete;
  SyntheticPopularity& operator=(const SyntheticPopularity&) = delete;

  const RoutingShape& shape() const { return shape_; }
  const RoutingSpec& spec() const { return spec_; }
  uint64_t seed() const { return seed_; }

 private:
  friend class SyntheticRoutingModel;

  struct GpuShares;
  struct Epoch {
    std::vector<std::vector<double>> popularity;  // per domain
    std::vector<std::vector<double>> pi;          // per domain
    std::vector<double> mix_pi;                   // domain-weighted pi
    uint64_t version = 0;                         // new with every epoch drawn
    // Destination shares of the expert-to-GPU maps models hold (expired ones pruned on lookup).
    std::vector<std::weak_ptr<GpuShares>> gpu;
  };

  struct GpuShares {
    int32_t rows = 0;
    std::vector<int32_t> placement;  // the expert-to-GPU map
    std::vector<double> shares;      // rows x destinations
    // Their multinomials, one per row, prepared on the first reuse of the shares that draws every
    // destination (a layer whose placement or shares change at every call never pays for them,
    // nor one drawn by its candidates only).
    std::vector<PreparedMultinomial> draws;
    // The candidate draw of the shares (one row), built on its first use.
    std::optional<CandidateMultinomial> candidates;
  };

  struct Layer {
    Layer(uint64_t seed, int32_t layer_idx)
        : drift_rng(seed, "routing.drift.L" + std::to_string(layer_idx)) {}

    LayerSkewSpec skew;
    std::vector<int32_t> cluster_of_expert;
    RngStream drift_rng;
    std::vector<int64_t> epoch_starts{0};
    std::map<int64_t, std::shared_ptr<Epoch>> epochs;
    const std::vector<double>* zipf_table = nullptr;  // Zipf skew: its weights by rank
  };

  // The epoch of a step for a layer (0 without drift), and the first step of an epoch.
  int64_t epoch_of(int32_t moe_layer_idx, int64_t step_idx);
  int64_t epoch_start_step(int32_t moe_layer_idx, int64_t epoch_idx);
  // The layer's shares in epoch `epoch_idx`: kept while a model holds them (and the last few
  // others), drawn again from their streams otherwise.
  std::shared_ptr<Epoch> epoch(int32_t moe_layer_idx, int64_t epoch_idx);
  // The destination shares of `gpu_of_expert` over num_dst_gpus (num_rows: 1 for the domain mix,
  // or one per domain) in `epoch`: one some model holds, or new.
  std::shared_ptr<GpuShares> gpu_shares(Epoch& epoch, std::span<const int32_t> gpu_of_expert,
                                        int32_t num_dst_gpus, int32_t num_rows);

  RoutingShape shape_;
  RoutingSpec spec_;
  uint64_t seed_;
  std::vector<double> domain_weights_;  // normalised
  std::vector<std::unique_ptr<Layer>> layers_;
  std::map<double, std::vector<double>> zipf_tables_;  // Zipf weights by rank, per exponent
};

}  // namespace moesim::sim
