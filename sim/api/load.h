// Loading inputs for the API (sim/api.h): a scenario from a file or held in memory, with its
// overrides; a model card or a topology with its derived figures (`moesim model show`,
// `moesim topo show`). Errors are ConfigErrors naming the file, key path and reason, or
// UsageErrors for a bad request value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/output/model_summary.h"
#include "sim/scenario/scenario.h"
#include "sim/study/overrides.h"
#include "sim/topology/topology_summary.h"

namespace moesim::sim::api {

// Where a scenario comes from and what is changed in it.
struct ScenarioSource {
  std::string path;  // a scenario file (scenarios/*.toml)
  // A scenario held in memory instead (ScenarioTemplate::from_table, e.g. a Python dict); `path`
  // is unused then.
  std::shared_ptr<const study::ScenarioTemplate> held;
  std::vector<std::string> dropped;        // keys or tables removed first (compare --drop-a)
  std::vector<study::Override> overrides;  // applied in order after the drops (run --set)

  // The file, or the name standing for the held scenario in messages.
  const std::string& name() const { return held ? held->path() : path; }
};

// A scenario loaded from its source.
struct LoadedScenario {
  Scenario scenario;  // drops and overrides applied, policy settings resolved
  // The template it was made from; null for a file read as it is (no drops, no overrides).
  std::shared_ptr<const study::ScenarioTemplate> source_template;
  std::vector<study::Override> overrides;

  // What resolved/scenario.toml holds: the TOML text with the changes applied for a template;
  // nullopt for a file read as it is (its own bytes).
  std::optional<std::string> resolved_text() const;
};

// Loads and checks the scenario (sim/study/overrides.h: one parser for files, dicts and
// overrides). A file without drops or overrides is read as load_scenario reads it.
LoadedScenario load(const ScenarioSource& source);
// The same, always through a ScenarioTemplate (its TOML syntax check first), as the studies that
// change scenarios (compare) read every side.
LoadedScenario load_template(const ScenarioSource& source);

// `moesim model show CARD [--context TOKENS]`: the card's derived figures at a context length
// in [1, the card's max_context_tokens] (UsageError otherwise).
struct ModelShowRequest {
  std::string card_path;  // a TOML card or a HuggingFace config.json
  int64_t context_tokens = 4096;
};
ModelSummary model_show(const ModelShowRequest& request);

// `moesim topo show FILE`: GPUs, links, bandwidths, bisection and route latencies.
TopologySummary topo_show(const std::string& topology_path);

}  // namespace moesim::sim::api
