// Routing configuration: the shape of the router (from the model card) and the skew model
// (from the scenario's [routing] table), as validated plain structs.
//
// The skew model is per MoE layer: defaults, then [[routing.layer_overrides]] over inclusive
// layer ranges, then the layer-stage profile (a piecewise-constant function of layer depth that
// scales the skew and the co-activation strength). docs/routing.md lists every key.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moesim::sim {

class TomlTable;
struct ModelCard;

// The router's shape. Experts are numbered 0..num_experts-1; group g holds the contiguous
// experts [g * E / G, (g + 1) * E / G). num_groups == 1 is plain top-k.
struct RoutingShape {
  int32_t num_moe_layers = 1;  // >= 1
  int32_t num_experts = 1;     // routed experts per MoE layer, >= 1
  int32_t top_k = 1;           // experts per token, 1..num_experts
  int32_t num_groups = 1;      // expert groups, divides num_experts
  int32_t topk_groups = 1;     // groups a token may use, 1..num_groups; topk_groups * experts
                               // per group >= top_k

  int32_t experts_per_group() const { return num_experts / num_groups; }
  int32_t group_of(int32_t expert_idx) const { return expert_idx / experts_per_group(); }
};

// Checks the invariants above; throws ConfigError naming `source` (a file or "model card")
// and the offending field.
void validate_routing_shape(const RoutingShape& shape, const std::string& source);

// The routing shape of a model card: its number of MoE layers and the MoE spec shared by all of
// them. Throws ConfigError when the card has no MoE layer or its MoE layers differ in experts,
// top_k or groups.
RoutingShape routing_shape_of(const ModelCard& card);

enum class PopularityKind { kUniform, kZipf, kDirichlet };
// "uniform", "zipf", "dirichlet".
std::string_view popularity_kind_name(PopularityKind kind);

// Experts that fire together: each group's experts are split at random (per layer) into
// clusters of cluster_size; after a token's first pick, each further pick is, with probability
// `prob`, a uniform choice among the not-yet-picked cluster mates of its picks (when any).
struct CoactivationSpec {
  int32_t cluster_size = 0;  // experts per cluster; 0 = no co-activation; else >= 2 and divides
                             // the experts per group
  double prob = 0.0;         // in [0, 1]
};

// Drift of the hot set: the layer's popularity is re-drawn at epoch boundaries; epoch lengths in
// steps are Gamma-distributed with the given mean and coefficient of variation, rounded to the
// nearest integer, at least 1.
struct DriftSpec {
  bool enabled = false;
  double mean_epoch_steps = 100.0;  // >= 1
  double epoch_cv = 0.5;            // >= 0; 0 = every epoch lasts mean_epoch_steps (rounded)
};

// The skew of one MoE layer.
struct LayerSkewSpec {
  PopularityKind popularity = PopularityKind::kUniform;
  double zipf_s = 1.0;           // Zipf exponent over popularity ranks, >= 0 (kZipf)
  double dirichlet_alpha = 1.0;  // symmetric Dirichlet concentration, > 0 (kDirichlet)
  CoactivationSpec coactivation;
  DriftSpec drift;
};

// Depth stages: depth x = layer / (num_moe_layers - 1) in [0, 1] (0 for a single layer);
// shallow when x < shallow_end, deep when x >= deep_start, middle otherwise. The stage's
// skew_scale multiplies zipf_s and divides dirichlet_alpha (0 makes the layer uniform); its
// coactivation_scale multiplies coactivation.prob (result must stay <= 1).
struct StageProfile {
  bool enabled = false;
  double shallow_end = 0.25;                                   // in [0, 1]
  double deep_start = 0.75;                                    // in [shallow_end, 1]
  std::array<double, 3> skew_scale = {1.0, 1.0, 1.0};          // shallow, middle, deep; >= 0
  std::array<double, 3> coactivation_scale = {1.0, 1.0, 1.0};  // >= 0
};

// A request domain (code, math, chat, ...): each has its own popularity permutation, so domains
// prefer different hot sets. `weight` is its share of tokens when the caller gives no split.
struct DomainSpec {
  std::string name;
  double weight = 1.0;  // > 0; weights are normalised over domains
};

// Skew settings for the MoE layers first_layer..last_layer (inclusive).
struct LayerOverride {
  int32_t first_layer = 0;
  int32_t last_layer = 0;
  LayerSkewSpec skew;
};

// How counts are drawn (docs/routing.md, "Sampling"):
//  - kMargins: the layer's per-expert (or per-destination) totals are one exact capped
//    multinomial; each source's row is then its expected share of those totals, rounded by
//    systematic sampling (one uniform per source). Fastest; totals per expert/GPU have the
//    multinomial law, single cells have less than multinomial variance.
//  - kCounts: an independent capped multinomial per source, O(experts) binomials per source.
//  - kPerToken: each token's top-k set is sampled (exact, O(tokens * top_k)).
//  - kAuto: kPerToken for sources with at most per_token_max_tokens tokens, kMargins above.
enum class SamplingMode { kMargins, kCounts, kPerToken, kAuto };
// "margins", "counts", "per_token", "auto".
std::string_view sampling_mode_name(SamplingMode mode);

struct RoutingSpec {
  std::string preset;  // the preset this spec started from; "" for none
  LayerSkewSpec defaults;
  std::vector<LayerOverride> layer_overrides;  // later entries win
  StageProfile stages;
  std::vector<DomainSpec> domains;  // empty: one anonymous domain
  SamplingMode sampling = SamplingMode::kMargins;
  int32_t per_token_max_tokens = 64;  // kAuto threshold, >= 0

  // The effective skew of a MoE layer: overrides, then the stage profile applied.
  // Precondition: 0 <= moe_layer_idx < num_moe_layers.
  LayerSkewSpec layer_skew(int32_t moe_layer_idx, int32_t num_moe_layers) const;
  int32_t num_domains() const { return domains.empty() ? 1 : static_cast<int32_t>(domains.size()); }
};

// Names of the shipped presets, and the preset itself. Unknown names are a logic error for
// routing_preset (parse_routing reports them as ConfigError).
std::vector<std::string> routing_preset_names();
RoutingSpec routing_preset(std::string_view name);

// Parses a [routing] table (see docs/routing.md): an optional `preset` whose values the other
// keys override. Calls finish() on the table and its sub-tables; every error is a ConfigError
// with file, line, key path and reason. Layer ranges are checked against num_moe_layers and
// cluster sizes against shape.experts_per_group().
RoutingSpec parse_routing(TomlTable& table, const RoutingShape& shape);

// Checks a spec built in code against a shape (the parser calls it): throws ConfigError naming
// `source` and the field.
void validate_routing_spec(const RoutingSpec& spec, const RoutingShape& shape,
                           const std::string& source);

}  // namespace moesim::sim
