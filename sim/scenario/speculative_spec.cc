#include "sim/scenario/speculative_spec.h"

#include <filesystem>
#include <string>
#include <utility>

#include "sim/config/input_files.h"
#include "sim/model/model_card_parser.h"

namespace moesim::sim {
namespace {

// The draft model card of method "draft_model": dense layers (no MoE, no recurrent state) and
// the target's vocabulary (the two share the tokenizer).
void read_draft_model(TomlTable& t, const ModelCard& card, const std::string& base_dir,
                      SpeculativeSpec& s) {
  std::filesystem::path p(t.get_string("draft_model"));
  if (!p.is_absolute()) p = (std::filesystem::path(base_dir) / p).lexically_normal();
  s.draft_model_path = p.string();
  check_input_path(t, "draft_model", s.draft_model_path, InputKind::kConfig);
  auto draft = std::make_shared<const ModelCard>(load_model_card(s.draft_model_path));
  if (draft->vocab_size != card.vocab_size) {
    t.fail("draft_model", "draft model '" + draft->name + "' has vocab_size " +
                              std::to_string(draft->vocab_size) + ", the target '" + card.name +
                              "' " + std::to_string(card.vocab_size) +
                              " (draft and target share the tokenizer)");
  }
  for (const LayerSpec& l : draft->layers) {
    if (l.ffn.is_moe || l.attention.kind == AttentionKind::kKDA) {
      t.fail("draft_model", "draft model '" + draft->name +
                                "' has MoE or KDA layers; only dense draft models (GQA or MLA "
                                "attention, dense FFNs) are modelled");
    }
  }
  s.draft_model = std::move(draft);
}

}  // namespace

const char* speculative_method_name(SpeculativeMethod method) {
  return method == SpeculativeMethod::kDraftModel ? "draft_model" : "mtp";
}

SpeculativeSpec parse_speculative(TomlTable& t, const ModelCard& card,
                                  const std::string& base_dir) {
  SpeculativeSpec s;
  s.enabled = true;
  const std::string method = t.get_enum("method", {"mtp", "draft_model"});
  if (card.layers.empty()) t.fail("method", "model '" + card.name + "' has no layers");
  if (method == "draft_model") {
    s.method = SpeculativeMethod::kDraftModel;
    read_draft_model(t, card, base_dir, s);
  } else {
    s.method = SpeculativeMethod::kMtp;
    if (card.num_mtp_layers < 1) {
      t.fail("method",
             "\"mtp\" needs MTP modules, and model '" + card.name + "' has num_mtp_layers = 0");
    }
    if (t.has("draft_model")) t.fail("draft_model", "only with method = \"draft_model\"");
  }
  if (s.method == SpeculativeMethod::kDraftModel) {
    s.draft_gpus = static_cast<int32_t>(t.get_int_in_or("draft_gpus", 0, 1 << 20, 0));
  } else if (t.has("draft_gpus")) {
    t.fail("draft_gpus",
           "only with method = \"draft_model\" (MTP modules run on the target's GPUs)");
  }
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
  if (auto by = t.find_table("acceptance_by_domain")) {
    for (const std::string& name : by->keys()) {
      int domain = -1;
      for (int d = 0; d < kNumDomains; ++d) {
        if (domain_name(static_cast<Domain>(d)) == name) domain = d;
      }
      if (domain < 0) by->fail(name, "unknown domain (valid: code, math, chat, multilingual)");
      std::vector<double>& a = s.acceptance_by_domain[static_cast<size_t>(domain)];
      if (by->is_array(name)) {
        a = by->get_double_array(name);
        if (static_cast<int64_t>(a.size()) != s.num_draft_tokens) {
          by->fail(name, "has " + std::to_string(a.size()) +
                             " values; draft_tokens = " + std::to_string(s.num_draft_tokens) +
                             " needs one per draft position (or give one rate)");
        }
        for (size_t i = 0; i < a.size(); ++i) {
          if (!(a[i] >= 0.0 && a[i] <= 1.0)) {
            by->fail(name, "value " + std::to_string(i) + " (" + std::to_string(a[i]) +
                               ") is outside [0, 1]");
          }
        }
      } else {
        a.assign(static_cast<size_t>(s.num_draft_tokens), by->get_double_in(name, 0.0, 1.0));
      }
    }
    by->finish();
  }
  t.finish();
  return s;
}

}  // namespace moesim::sim
