// Importing a HuggingFace config.json as a model card.
//
// Supported model_type values: deepseek_v3, deepseek_v2, kimi_k2 (MLA + DeepSeekMoE keys),
// qwen3_moe, mixtral. Keys that change the architecture are read; known keys that do not (norm
// epsilons, token ids, rope settings, training-only coefficients) are on a documented ignore list
// (docs/models.md); any other key is an error with a "did you mean" suggestion, so a new
// architecture feature is never silently dropped.
#pragma once

#include <string>
#include <string_view>

#include "sim/config/config_error.h"
#include "sim/model/model_card.h"

namespace moesim::sim {

// Parses and validates config.json text; `file` names it in errors (line:col of the key's first
// occurrence when known). The card's name is model_type unless `name` is non-empty.
ModelCard parse_hf_config(std::string_view json_text, const std::string& file,
                          const std::string& name = "");

}  // namespace moesim::sim
