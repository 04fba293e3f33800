#include "sim/policy/expert_pruning.h"

#include <filesystem>
#include <optional>

#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/model/model_card.h"
#include "sim/routing/routing_spec.h"

namespace moesim::sim {

ExpertPruningConfig parse_expert_pruning_config(TomlTable& t) {
  ExpertPruningConfig c;
  c.fraction = t.get_double_in_or("fraction", 0.0, 1.0, c.fraction);
  if (c.fraction >= 1.0) t.fail("fraction", "must be in [0, 1)");
  c.dead_threshold = t.get_double_in_or("dead_threshold", 0.0, 1.0, c.dead_threshold);
  c.profile_steps =
      static_cast<int32_t>(t.get_int_in_or("profile_steps", 1, 1 << 20, c.profile_steps));
  c.tokens_per_step =
      static_cast<int32_t>(t.get_int_in_or("tokens_per_step", 1, 1 << 24, c.tokens_per_step));
  c.plan_file = t.get_string_or("plan_file", "");
  if (!c.plan_file.empty() && t.has("fraction")) {
    t.fail("plan_file", "give either fraction or plan_file, not both");
  }
  t.finish();
  return c;
}

ExpertPruningSettings parse_expert_pruning_settings(TomlTable& table, const Scenario& scenario) {
  const ModelCard& card = *scenario.model;
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  if (!moe) table.fail_table("expert_pruning needs a model with MoE layers");
  for (const PolicyConfig& other : scenario.policies) {
    if (other.name == "hot_expert_replication" || other.name == "eplb") {
      table.fail_table("expert_pruning cannot be combined with [policies." + other.name +
                       "] (both change the expert placement)");
    }
  }
  ExpertPruningSettings settings;
  settings.config = parse_expert_pruning_config(table);
  const ExpertPruningConfig& config = settings.config;
  const int64_t num_pruned =
      PruningPlan::num_pruned_for(config.fraction, static_cast<int32_t>(moe->num_routed_experts));
  if (config.plan_file.empty() && moe->num_routed_experts - num_pruned < moe->top_k) {
    table.fail("fraction", "prunes " + std::to_string(num_pruned) + " of the " +
                               std::to_string(moe->num_routed_experts) +
                               " experts per layer; at least top_k = " +
                               std::to_string(moe->top_k) + " must stay");
  }
  if (config.plan_file.empty()) return settings;
  std::filesystem::path path(config.plan_file);
  if (path.is_relative()) path = std::filesystem::path(scenario.source_file).parent_path() / path;
  InputFile file(path.string(), InputKind::kConfig);
  const std::optional<std::string> text = file.ok() ? file.read_all() : std::nullopt;
  if (!text) {
    table.fail("plan_file", file.problem()->missing
                                ? "cannot read " + path.string()
                                : "cannot read (" + file.problem()->reason + "): " + path.string());
  }
  try {
    settings.plan = std::make_shared<const PruningPlan>(
        parse_pruning_plan_json(*text, path.string(), routing_shape_of(card)));
  } catch (const ConfigError& e) {
    table.fail("plan_file", path.string() + ": " + e.key_path() + ": " + e.reason());
  }
  return settings;
}

}  // namespace moesim::sim
