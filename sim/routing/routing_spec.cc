#include "sim/routing/routing_spec.h"

#include <cmath>
#include <sstream>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/config/toml_source.h"
#include "sim/model/model_card.h"

namespace moesim::sim {
namespace {

[[noreturn]] void spec_error(const std::string& source, const std::string& field,
                             const std::string& reason) {
  throw ConfigError(source, 0, 0, field, reason);
}

std::string format_double(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

// Reads the per-layer skew keys present in `t`, keeping `skew`'s values for absent keys.
void parse_skew_keys(TomlTable& t, LayerSkewSpec& skew) {
  const std::string current(popularity_kind_name(skew.popularity));
  const std::string kind = t.get_enum_or("popularity", {"uniform", "zipf", "dirichlet"}, current);
  skew.popularity = kind == "zipf"        ? PopularityKind::kZipf
                    : kind == "dirichlet" ? PopularityKind::kDirichlet
                                          : PopularityKind::kUniform;
  skew.zipf_s = t.get_double_in_or("zipf_s", 0.0, 100.0, skew.zipf_s);
  skew.dirichlet_alpha = t.get_double_in_or("dirichlet_alpha", 1e-6, 1e9, skew.dirichlet_alpha);
  if (auto co = t.find_table("coactivation")) {
    skew.coactivation.cluster_size = static_cast<int32_t>(
        co->get_int_in_or("cluster_size", 0, 1 << 20, skew.coactivation.cluster_size));
    if (skew.coactivation.cluster_size == 1) {
      co->fail("cluster_size", "must be 0 (off) or at least 2");
    }
    skew.coactivation.prob = co->get_double_in_or("prob", 0.0, 1.0, skew.coactivation.prob);
    co->finish();
  }
  if (auto drift = t.find_table("drift")) {
    skew.drift.enabled = drift->get_bool_or("enabled", skew.drift.enabled);
    skew.drift.mean_epoch_steps =
        drift->get_double_in_or("mean_epoch_steps", 1.0, 1e12, skew.drift.mean_epoch_steps);
    skew.drift.epoch_cv = drift->get_double_in_or("epoch_cv", 0.0, 100.0, skew.drift.epoch_cv);
    drift->finish();
  }
}

void parse_stages(TomlTable& t, StageProfile& stages) {
  stages.enabled = t.get_bool_or("enabled", true);
  stages.shallow_end = t.get_double_in_or("shallow_end", 0.0, 1.0, stages.shallow_end);
  stages.deep_start = t.get_double_in_or("deep_start", 0.0, 1.0, stages.deep_start);
  if (stages.deep_start < stages.shallow_end) {
    t.fail("deep_start", "must be >= shallow_end (" + format_double(stages.shallow_end) + ")");
  }
  for (const char* key : {"skew_scale", "coactivation_scale"}) {
    auto values = t.find_double_array(key);
    if (!values) continue;
    if (values->size() != 3) {
      t.fail(key,
             "expected 3 values (shallow, middle, deep), got " + std::to_string(values->size()));
    }
    for (double v : *values) {
      if (v < 0.0) t.fail(key, "values must be >= 0, got " + format_double(v));
    }
    auto& dst =
        std::string_view(key) == "skew_scale" ? stages.skew_scale : stages.coactivation_scale;
    for (size_t i = 0; i < 3; ++i) dst[i] = (*values)[i];
  }
}

void validate_skew(const LayerSkewSpec& skew, const RoutingShape& shape, const std::string& source,
                   const std::string& where) {
  if (skew.zipf_s < 0.0) spec_error(source, where + "zipf_s", "must be >= 0");
  if (!(skew.dirichlet_alpha > 0.0)) spec_error(source, where + "dirichlet_alpha", "must be > 0");
  const int32_t c = skew.coactivation.cluster_size;
  if (c != 0 && (c < 2 || shape.experts_per_group() % c != 0)) {
    spec_error(source, where + "coactivation.cluster_size",
               "must be 0 or >= 2 and divide the experts per group (" +
                   std::to_string(shape.experts_per_group()) + "), got " + std::to_string(c));
  }
  if (skew.coactivation.prob < 0.0 || skew.coactivation.prob > 1.0) {
    spec_error(source, where + "coactivation.prob", "must be in [0, 1]");
  }
  if (skew.drift.mean_epoch_steps < 1.0) {
    spec_error(source, where + "drift.mean_epoch_steps", "must be >= 1");
  }
  if (skew.drift.epoch_cv < 0.0) spec_error(source, where + "drift.epoch_cv", "must be >= 0");
}

}  // namespace

void validate_routing_shape(const RoutingShape& s, const std::string& source) {
  if (s.num_moe_layers < 1) spec_error(source, "num_moe_layers", "must be >= 1");
  if (s.num_experts < 1) spec_error(source, "num_experts", "must be >= 1");
  if (s.top_k < 1 || s.top_k > s.num_experts) {
    spec_error(source, "top_k", "must be in [1, num_experts]");
  }
  if (s.num_groups < 1 || s.num_experts % s.num_groups != 0) {
    spec_error(source, "num_groups", "must be >= 1 and divide num_experts");
  }
  if (s.topk_groups < 1 || s.topk_groups > s.num_groups) {
    spec_error(source, "topk_groups", "must be in [1, num_groups]");
  }
  if (static_cast<int64_t>(s.topk_groups) * s.experts_per_group() < s.top_k) {
    spec_error(source, "topk_groups", "topk_groups * experts per group must be >= top_k");
  }
}

RoutingShape routing_shape_of(const ModelCard& card) {
  const std::string source = card.source_file.empty() ? "model card" : card.source_file;
  RoutingShape shape;
  shape.num_moe_layers = 0;
  const MoeSpec* first = nullptr;
  for (const LayerSpec& layer : card.layers) {
    if (!layer.ffn.is_moe) continue;
    const MoeSpec& moe = layer.ffn.moe;
    if (first == nullptr) {
      first = &moe;
    } else if (moe.num_routed_experts != first->num_routed_experts || moe.top_k != first->top_k ||
               moe.num_expert_groups != first->num_expert_groups ||
               moe.topk_groups != first->topk_groups) {
      spec_error(source, "layers", "MoE layers differ in experts, top_k or groups");
    }
    ++shape.num_moe_layers;
  }
  if (first == nullptr) spec_error(source, "layers", "the model has no MoE layer to route");
  shape.num_experts = static_cast<int32_t>(first->num_routed_experts);
  shape.top_k = static_cast<int32_t>(first->top_k);
  shape.num_groups = static_cast<int32_t>(first->num_expert_groups);
  shape.topk_groups = static_cast<int32_t>(first->topk_groups);
  validate_routing_shape(shape, source);
  return shape;
}

std::string_view popularity_kind_name(PopularityKind kind) {
  switch (kind) {
    case PopularityKind::kUniform:
      return "uniform";
    case PopularityKind::kZipf:
      return "zipf";
    case PopularityKind::kDirichlet:
      return "dirichlet";
  }
  return "?";
}

std::string_view sampling_mode_name(SamplingMode mode) {
  switch (mode) {
    case SamplingMode::kMargins:
      return "margins";
    case SamplingMode::kCounts:
      return "counts";
    case SamplingMode::kPerToken:
      return "per_token";
    case SamplingMode::kAuto:
      return "auto";
  }
  return "?";
}

LayerSkewSpec RoutingSpec::layer_skew(int32_t moe_layer_idx, int32_t num_moe_layers) const {
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < num_moe_layers, "layer out of range");
  LayerSkewSpec skew = defaults;
  for (const LayerOverride& o : layer_overrides) {
    if (moe_layer_idx >= o.first_layer && moe_layer_idx <= o.last_layer) skew = o.skew;
  }
  if (!stages.enabled) return skew;
  const double depth =
      num_moe_layers > 1 ? static_cast<double>(moe_layer_idx) / (num_moe_layers - 1) : 0.0;
  const int stage = depth < stages.shallow_end ? 0 : (depth >= stages.deep_start ? 2 : 1);
  const double scale = stages.skew_scale[stage];
  if (scale == 0.0) {
    skew.popularity = PopularityKind::kUniform;
  } else {
    skew.zipf_s *= scale;
    skew.dirichlet_alpha /= scale;
  }
  skew.coactivation.prob *= stages.coactivation_scale[stage];
  return skew;
}

std::vector<std::string> routing_preset_names() {
  return {"uniform", "deepseek-v3-decode", "staged-drift"};
}

RoutingSpec routing_preset(std::string_view name) {
  RoutingSpec spec;
  spec.preset = std::string(name);
  if (name == "uniform") return spec;
  if (name == "deepseek-v3-decode") {
    // Calibrated (tests/sim/routing/published_levels_test.cc) to a per-GPU imbalance ~1.5 and a
    // per-expert imbalance ~11 for EP32 decode at 256 tokens per GPU with DeepSeek-V3 shapes.
    spec.defaults.popularity = PopularityKind::kZipf;
    spec.defaults.zipf_s = 0.63;
    return spec;
  }
  if (name == "staged-drift") {
    // Every mechanism at once: near-uniform shallow layers, sharp middle layers with clusters
    // that fire together, concentrated deep layers, a hot set lasting ~100 steps, four domains.
    spec.defaults.popularity = PopularityKind::kZipf;
    spec.defaults.zipf_s = 1.0;
    spec.defaults.coactivation = {.cluster_size = 4, .prob = 0.5};
    spec.defaults.drift = {.enabled = true, .mean_epoch_steps = 100.0, .epoch_cv = 0.5};
    spec.stages.enabled = true;
    spec.stages.skew_scale = {0.2, 1.0, 1.4};
    spec.stages.coactivation_scale = {0.0, 1.0, 0.2};
    spec.domains = {{"code", 0.3}, {"math", 0.2}, {"chat", 0.4}, {"multilingual", 0.1}};
    return spec;
  }
  MOESIM_CHECK(false, "unknown routing preset");
  return spec;
}

RoutingSpec parse_routing(TomlTable& t, const RoutingShape& shape) {
  RoutingSpec spec;
  if (auto preset = t.find_string("preset")) {
    bool known = false;
    std::string valid;
    for (const std::string& n : routing_preset_names()) {
      known = known || n == *preset;
      valid += (valid.empty() ? "" : ", ") + n;
    }
    if (!known) t.fail("preset", "unknown preset '" + *preset + "' (valid: " + valid + ")");
    spec = routing_preset(*preset);
  }
  parse_skew_keys(t, spec.defaults);
  const std::string sampling = t.get_enum_or("sampling", {"margins", "counts", "per_token", "auto"},
                                             std::string(sampling_mode_name(spec.sampling)));
  spec.sampling = sampling == "margins"     ? SamplingMode::kMargins
                  : sampling == "counts"    ? SamplingMode::kCounts
                  : sampling == "per_token" ? SamplingMode::kPerToken
                                            : SamplingMode::kAuto;
  spec.per_token_max_tokens = static_cast<int32_t>(
      t.get_int_in_or("per_token_max_tokens", 0, 1 << 30, spec.per_token_max_tokens));
  if (auto stages = t.find_table("stages")) {
    parse_stages(*stages, spec.stages);
    stages->finish();
  }
  std::vector<TomlTable> domains = t.get_table_array("domains", false);
  if (!domains.empty()) spec.domains.clear();
  for (TomlTable& d : domains) {
    DomainSpec domain;
    domain.name = d.get_string("name");
    for (const DomainSpec& other : spec.domains) {
      if (other.name == domain.name) d.fail("name", "duplicate domain '" + domain.name + "'");
    }
    domain.weight = d.get_double_in_or("weight", 1e-12, 1e12, 1.0);
    d.finish();
    spec.domains.push_back(std::move(domain));
  }
  for (TomlTable& o : t.get_table_array("layer_overrides", false)) {
    LayerOverride lo;
    const std::vector<int64_t> range = o.get_int_array("layers");
    if (range.size() != 2) o.fail("layers", "expected [first, last]");
    if (range[0] < 0 || range[1] < range[0] || range[1] >= shape.num_moe_layers) {
      o.fail("layers", "range [" + std::to_string(range[0]) + ", " + std::to_string(range[1]) +
                           "] is not within the " + std::to_string(shape.num_moe_layers) +
                           " MoE layers (0-based, first <= last)");
    }
    lo.first_layer = static_cast<int32_t>(range[0]);
    lo.last_layer = static_cast<int32_t>(range[1]);
    lo.skew = spec.defaults;
    parse_skew_keys(o, lo.skew);
    try {
      validate_skew(lo.skew, shape, o.file(), "");
    } catch (const ConfigError& e) {
      o.fail(e.key_path(), e.reason());
    }
    o.finish();
    spec.layer_overrides.push_back(std::move(lo));
  }
  try {
    validate_skew(spec.defaults, shape, t.file(), "");
    validate_routing_spec(spec, shape, t.file());
  } catch (const ConfigError& e) {
    // Re-raise located at the key when it is present in this table.
    const std::string& key = e.key_path();
    const size_t dot = key.find('.');
    if (dot != std::string::npos && t.has(key.substr(0, dot))) {
      t.get_table(key.substr(0, dot)).fail(key.substr(dot + 1), e.reason());
    }
    if (t.has(key)) t.fail(key, e.reason());
    t.fail_table(key + ": " + e.reason());
  }
  t.finish();
  return spec;
}

void validate_routing_spec(const RoutingSpec& spec, const RoutingShape& shape,
                           const std::string& source) {
  validate_skew(spec.defaults, shape, source, "");
  for (size_t i = 0; i < spec.layer_overrides.size(); ++i) {
    const LayerOverride& o = spec.layer_overrides[i];
    const std::string where = "layer_overrides[" + std::to_string(i) + "].";
    if (o.first_layer < 0 || o.last_layer < o.first_layer || o.last_layer >= shape.num_moe_layers) {
      spec_error(source, where + "layers", "range outside the MoE layers");
    }
    validate_skew(o.skew, shape, source, where);
  }
  for (const DomainSpec& d : spec.domains) {
    if (!(d.weight > 0.0)) spec_error(source, "domains." + d.name + ".weight", "must be > 0");
  }
  if (spec.per_token_max_tokens < 0) spec_error(source, "per_token_max_tokens", "must be >= 0");
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    const double prob = spec.layer_skew(l, shape.num_moe_layers).coactivation.prob;
    if (prob > 1.0) {
      spec_error(source, "stages.coactivation_scale",
                 "coactivation.prob x scale = " + format_double(prob) + " > 1 at MoE layer " +
                     std::to_string(l));
    }
  }
}

}  // namespace moesim::sim
