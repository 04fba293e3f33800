// Reading model cards: TOML cards (models/*.toml, or a table embedded in a scenario) and
// HuggingFace config.json files (see hf_config.h). The TOML schema is documented in
// docs/models.md; every key is checked, unknown keys are errors with a suggestion.
#pragma once

#include <string>

#include "sim/config/config_error.h"
#include "sim/model/model_card.h"

namespace moesim::sim {

class TomlTable;

// Loads a card from a TOML file, or from a HuggingFace config.json when the path ends in ".json".
// The result is validated. Errors are ConfigError naming file, line:col, key path and reason.
ModelCard load_model_card(const std::string& path);

// Parses and validates a card from a TOML table (the root of a card file, or a table embedded in
// a scenario). Calls finish() on `table` and its sub-tables: unknown keys are errors.
// source_file is set to table.file().
ModelCard parse_model_card(TomlTable& table);

}  // namespace moesim::sim
