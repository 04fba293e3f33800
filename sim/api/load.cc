#include "sim/api/load.h"

#include "sim/api/usage_error.h"
#include "sim/model/model_card_parser.h"
#include "sim/policy/policy_registry.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim::api {

std::optional<std::string> LoadedScenario::resolved_text() const {
  if (!source_template) return std::nullopt;
  return source_template->text_with(overrides);
}

LoadedScenario load(const ScenarioSource& source) {
  if (!source.held && source.dropped.empty() && source.overrides.empty()) {
    LoadedScenario loaded;
    loaded.scenario = load_scenario(source.path);
    resolve_policy_settings(loaded.scenario);
    return loaded;
  }
  return load_template(source);
}

LoadedScenario load_template(const ScenarioSource& source) {
  LoadedScenario loaded;
  loaded.overrides = source.overrides;
  std::shared_ptr<const study::ScenarioTemplate> t =
      source.held ? source.held
                  : std::make_shared<const study::ScenarioTemplate>(
                        study::ScenarioTemplate::load(source.path));
  if (!source.dropped.empty()) {
    t = std::make_shared<const study::ScenarioTemplate>(t->without(source.dropped));
  }
  loaded.scenario = t->instantiate(source.overrides);
  loaded.source_template = std::move(t);
  return loaded;
}

ModelSummary model_show(const ModelShowRequest& request) {
  const ModelCard card = load_model_card(request.card_path);
  if (request.context_tokens < 1 || request.context_tokens > card.max_context_tokens) {
    throw UsageError{"--context " + std::to_string(request.context_tokens) +
                     " is out of range [1, " + std::to_string(card.max_context_tokens) +
                     "] (the card's max_context_tokens)"};
  }
  return describe_model(card, request.context_tokens);
}

TopologySummary topo_show(const std::string& topology_path) {
  return describe_topology(load_topology(topology_path));
}

}  // namespace moesim::sim::api
