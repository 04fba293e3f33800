// Module names and patterns -> tensor groups: names are normalised (regex markers, escapes and
// the "model." / "layers.*." prefixes dropped) and matched by the distinguishing part, so that
// the spellings of transformers, AutoGPTQ, AutoAWQ and llm-compressor map alike.
#include "sim/model/hf_quant_modules.h"

namespace moesim::sim::hf_quant {
namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
bool contains(const std::string& s, std::string_view p) { return s.find(p) != std::string::npos; }

const char kPatternHelp[] =
    "supported: lm_head, embed_tokens, self_attn, mlp.gate / router, experts, shared_experts, "
    "mlp.(gate|up|gate_up|down)_proj, vision/multimodal modules; as names, globs or re: "
    "patterns";

// A module name or pattern ("lm_head", "model.layers.*.self_attn", "re:.*mlp\.experts\..*",
// "mlp.experts.0.up_proj") reduced to its distinguishing part: regex markers, escapes, leading
// "model." / "language_model." / "layers.*." and trailing wildcards removed.
std::string normalise_pattern(std::string s) {
  if (starts_with(s, "re:")) s = s.substr(3);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') continue;
    if (s[i] == '.' && i + 1 < s.size() && s[i + 1] == '*') {
      out += '*';
      ++i;
      continue;
    }
    if (s[i] == '$' || s[i] == '^') continue;
    out += s[i];
  }
  auto strip_front = [&](std::string_view p) {
    while (starts_with(out, p)) out = out.substr(p.size());
  };
  for (int pass = 0; pass < 3; ++pass) {
    while (!out.empty() && (out.front() == '*' || out.front() == '.')) out.erase(0, 1);
    strip_front("model.");
    strip_front("language_model.");
    strip_front("layers.*.");
    strip_front("layers.");
    // "layers.\d+." leaves a digit run: a per-layer rule.
  }
  while (!out.empty() && (out.back() == '*' || out.back() == '.')) out.pop_back();
  return out;
}

}  // namespace

std::optional<Module> classify_module(const std::string& pattern, bool* partial) {
  const std::string s = normalise_pattern(pattern);
  *partial = false;
  for (std::string_view outside :
       {"vision", "visual", "mm_projector", "multi_modal_projector", "audio", "mtp"}) {
    if (contains(s, outside)) return Module::kNotModelled;
  }
  if (!s.empty() && s.front() >= '0' && s.front() <= '9') {
    *partial = true;  // a rule for one layer index
  }
  if (contains(s, "lm_head")) return Module::kLmHead;
  if (contains(s, "embed_tokens")) return Module::kNotModelled;        // never quantised
  if (contains(s, "shared_expert_gate")) return Module::kNotModelled;  // hidden -> 1, not counted
  // Whether `key` is followed by more than a wildcard (a sub-module of the class).
  auto sub_after = [&](std::string_view key) {
    const size_t at = s.find(key);
    if (at == std::string::npos) return false;
    const std::string rest = s.substr(at + key.size());
    return !rest.empty() && rest != "*" && rest != ".*";
  };
  if (contains(s, "shared_expert")) {
    const std::string_view key = contains(s, "shared_experts") ? "shared_experts" : "shared_expert";
    *partial = *partial || sub_after(std::string(key) + ".");
    return Module::kSharedExperts;
  }
  if (contains(s, "experts")) {
    *partial = *partial || sub_after("experts.");
    return Module::kRoutedExperts;
  }
  if (contains(s, "self_attn") || s == "attn" || ends_with(s, ".attn")) {
    *partial = *partial || (contains(s, "self_attn.") && sub_after("self_attn."));
    return Module::kAttention;
  }
  if (s == "gate" || ends_with(s, ".gate") || ends_with(s, "router")) return Module::kRouter;
  for (std::string_view dense :
       {"mlp.(gate|up|gate_up|down)_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
        "feed_forward.gate_proj", "feed_forward.up_proj", "feed_forward.down_proj"}) {
    if (s == dense) {
      *partial = *partial || (s != "mlp.(gate|up|gate_up|down)_proj");
      return Module::kDenseFfn;
    }
  }
  return std::nullopt;
}

ModuleSet classify_list(HfJsonReader& r, std::string_view key,
                        const std::vector<std::string>& entries, bool allow_partial) {
  ModuleSet set{};
  for (const std::string& e : entries) {
    bool partial = false;
    const std::optional<Module> m = classify_module(e, &partial);
    if (!m) r.fail(key, "cannot map module '" + e + "' to a tensor group (" + kPatternHelp + ")");
    if (partial && !allow_partial) {
      r.fail(key, "module '" + e +
                      "' names part of a tensor group (one projection, expert or layer); "
                      "per-module precision inside a group is not supported");
    }
    if (*m != Module::kNotModelled) set[static_cast<size_t>(*m)] = true;
  }
  return set;
}

ModuleSet all_linear(bool router_is_linear) {
  ModuleSet s{};
  s[static_cast<size_t>(Module::kAttention)] = true;
  s[static_cast<size_t>(Module::kDenseFfn)] = true;
  s[static_cast<size_t>(Module::kRoutedExperts)] = true;
  s[static_cast<size_t>(Module::kSharedExperts)] = true;
  s[static_cast<size_t>(Module::kRouter)] = router_is_linear;
  s[static_cast<size_t>(Module::kLmHead)] = true;
  return s;
}

ModuleSet minus(ModuleSet a, const ModuleSet& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] && !b[i];
  return a;
}

void apply(const ModuleSet& modules, const Scheme& s, DType base, const ModelCard& card,
           Precision* p) {
  auto set = [&](TensorGroup g, DType* dtype) {
    *dtype = s.compute;
    p->storage[static_cast<size_t>(g)] = {s.bits, s.format};
  };
  if (modules[static_cast<size_t>(Module::kAttention)]) set(TensorGroup::kAttention, &p->attention);
  if (modules[static_cast<size_t>(Module::kDenseFfn)]) set(TensorGroup::kDenseFfn, &p->dense_ffn);
  if (modules[static_cast<size_t>(Module::kRoutedExperts)]) {
    set(TensorGroup::kRoutedExperts, &p->routed_experts);
  }
  if (modules[static_cast<size_t>(Module::kSharedExperts)]) {
    set(TensorGroup::kSharedExperts, &p->shared_experts);
  }
  if (modules[static_cast<size_t>(Module::kRouter)]) {
    DType router = s.compute;
    p->storage[static_cast<size_t>(TensorGroup::kRouter)] = {s.bits, s.format};
    p->router = router;
  }
  if (modules[static_cast<size_t>(Module::kLmHead)] && !card.tie_word_embeddings) {
    // The embeddings group holds the (never quantised) input table and the output head, equal
    // in size: the group's bits are their mean.
    const double bits = (bits_per_element(base) + s.bits) / 2.0;
    p->storage[static_cast<size_t>(TensorGroup::kEmbeddings)] = {
        bits, "embed_tokens " + std::string(dtype_name(base)) + ", lm_head " + s.format};
  }
}

}  // namespace moesim::sim::hf_quant
