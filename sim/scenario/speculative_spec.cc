#include "sim/scenario/speculative_spec.h"

#include <string>

namespace moesim::sim {

SpeculativeSpec parse_speculative(TomlTable& t, const ModelCard& card) {
  SpeculativeSpec s;
  s.enabled = true;
  const std::string method = t.get_string("method");
  if (method == "draft_model") {
    t.fail("method",
           "\"draft_model\" (a separate draft model card) is not modelled yet; use \"mtp\" (the "
           "model card's multi-token-prediction modules)");
  }
  if (method != "mtp") t.fail("method", "unknown method \"" + method + "\"; valid: mtp");
  s.method = SpeculativeMethod::kMtp;
  if (card.num_mtp_layers < 1) {
    t.fail("method",
           "\"mtp\" needs MTP modules, and model '" + card.name + "' has num_mtp_layers = 0");
  }
  if (card.layers.empty()) t.fail("method", "model '" + card.name + "' has no layers");
  s.num_draft_tokens = static_cast<int32_t>(t.get_int_in("draft_tokens", 1, 16));
  const bool has_list = t.has("acceptance");
  const bool has_rate = t.has("acceptance_rate");
  if (has_list == has_rate) {
    t.fail_table(
        "give exactly one of acceptance (a list, one value per draft position) or "
        "acceptance_rate (one value for every position)");
  }
  if (has_rate) {
    const double rate = t.get_double_in("acceptance_rate", 0.0, 1.0);
    s.acceptance.assign(static_cast<size_t>(s.num_draft_tokens), rate);
  } else {
    s.acceptance = t.get_double_array("acceptance");
    if (static_cast<int64_t>(s.acceptance.size()) != s.num_draft_tokens) {
      t.fail("acceptance", "has " + std::to_string(s.acceptance.size()) +
                               " values; draft_tokens = " + std::to_string(s.num_draft_tokens) +
                               " needs one per draft position");
    }
    for (size_t i = 0; i < s.acceptance.size(); ++i) {
      const double p = s.acceptance[i];
      if (!(p >= 0.0 && p <= 1.0)) {
        t.fail("acceptance",
               "value " + std::to_string(i) + " (" + std::to_string(p) + ") is outside [0, 1]");
      }
    }
  }
  t.finish();
  return s;
}

}  // namespace moesim::sim
