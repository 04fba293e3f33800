// quantization_config -> Precision. Each method names which module classes it quantises and
// how many bits one weight element costs once packed values, scales, zero points and
// permutation indices are counted:
//   fp8 (block)            8 + 32 / (block rows * block cols)      FP32 scale per block
//   mxfp4 (gpt-oss)        4.25 (DType::kMXFP4)                    E8M0 scale per 32
//   compressed-tensors     b + s / g (+ b / g asymmetric)          s = scale bits (the dtype's)
//   gptq                   b + 16 / g + b / g + 32 / hidden        fp16 scales, packed zeros,
//                                                                  int32 g_idx per input row
//   awq                    b + 16 / g (+ b / g with zero_point)    fp16 scales, packed zeros
// Per-channel scales (16 / in_features per weight) and GPTQ's g_idx (32 / out_features per
// weight) depend on each matrix's shape; both are counted with hidden_size for that width
// (docs/models.md bounds the error).
#include "sim/model/hf_quantization.h"

#include <array>
#include <set>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

using nlohmann::json;

// Module classes a quantisation rule can name.
enum class Module {
  kAttention,
  kDenseFfn,
  kRoutedExperts,
  kSharedExperts,
  kRouter,
  kLmHead,
  kNotModelled,  // outside the text model or not counted (vision tower, embedding, MTP, ...)
};
constexpr int kNumModules = 6;  // the classes a rule can quantise (kNotModelled excluded)

using ModuleSet = std::array<bool, kNumModules>;

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}
bool contains(const std::string& s, std::string_view p) { return s.find(p) != std::string::npos; }

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

// The module class a name or pattern names; nullopt when it cannot be mapped. `partial` is set
// when it names only part of a class (one projection of attention, one expert, one layer).
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

const char kPatternHelp[] =
    "supported: lm_head, embed_tokens, self_attn, mlp.gate / router, experts, shared_experts, "
    "mlp.(gate|up|gate_up|down)_proj, vision/multimodal modules; as names, globs or re: "
    "patterns";

// Maps every entry of the string array `key`; an entry naming part of a class is an error
// unless `allow_partial` (then the whole class counts as named).
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

// Every class a "Linear" target reaches.
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

// One quantisation scheme applied to a set of module classes.
struct Scheme {
  DType compute;  // the dtype the cost model computes in
  double bits;    // stored bits per weight element
  std::string format;
};

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

double base_bits(DType base) { return bits_per_element(base); }

// ---- fp8 ----------------------------------------------------------------------------------

void read_fp8(HfJsonReader& q, DType base, const ModelCard& card, bool router_is_linear,
              Precision* p) {
  q.ignore("activation_scheme");  // dynamic / static activation scales: no weight bytes
  const std::string fmt = q.get_string("fmt", "e4m3");
  if (fmt != "e4m3" && fmt != "e5m2") {
    q.fail("fmt", "unknown value '" + fmt + "' (valid: e4m3, e5m2)");
  }
  const std::vector<int64_t> block = q.get_int_array("weight_block_size", 1, 1 << 16);
  if (!block.empty() && block.size() != 2) {
    q.fail("weight_block_size",
           "expected [rows, cols], got " + std::to_string(block.size()) + " values");
  }
  Scheme s{DType::kFP8, 8.0, "fp8 " + fmt};
  if (!block.empty()) {
    s.bits += 32.0 / static_cast<double>(block[0] * block[1]);
    s.format +=
        ", " + std::to_string(block[0]) + "x" + std::to_string(block[1]) + " blocks, fp32 scales";
  } else {
    s.format += ", per-tensor scale";
  }
  ModuleSet modules = all_linear(router_is_linear);
  // transformers' FP8 integration leaves lm_head unconverted unless asked.
  modules[static_cast<size_t>(Module::kLmHead)] = false;
  for (const char* key : {"modules_to_not_convert", "ignored_layers"}) {
    modules = minus(modules, classify_list(q, key, q.get_string_array(key), false));
  }
  apply(modules, s, base, card, p);
}

// ---- mxfp4 (gpt-oss) ----------------------------------------------------------------------

void read_mxfp4(HfJsonReader& q, DType base, const ModelCard& card, Precision* p) {
  const ModuleSet kept = classify_list(q, "modules_to_not_convert",
                                       q.get_string_array("modules_to_not_convert"), false);
  if (kept[static_cast<size_t>(Module::kRoutedExperts)]) {
    q.fail("modules_to_not_convert", "lists the routed experts, the only modules mxfp4 quantises");
  }
  ModuleSet modules{};
  modules[static_cast<size_t>(Module::kRoutedExperts)] = true;
  apply(modules,
        {DType::kMXFP4, bits_per_element(DType::kMXFP4), "mxfp4 (e2m1, e8m0 scale per 32)"}, base,
        card, p);
}

// ---- compressed-tensors -------------------------------------------------------------------

const std::set<std::string, std::less<>> kCtNeutral = {
    "quantization_status", "global_compression_ratio", "version", "provider", "producer"};
const std::set<std::string, std::less<>> kCtWeightNeutral = {"dynamic", "observer",
                                                             "observer_kwargs", "actorder"};

Scheme read_ct_weights(HfJsonReader& g, DType base, int64_t hidden, const std::string& format,
                       bool* activations_quantised) {
  const json* w = g.get_object("weights");
  if (w == nullptr) g.fail("weights", "missing required key (object)");
  HfJsonReader wr = g.child(*w, "weights", &kCtWeightNeutral);
  const int64_t bits = wr.get_int("num_bits", 1, 16);
  const std::string type = wr.get_string("type", "int");
  const std::string strategy = wr.get_string("strategy");
  const bool symmetric = wr.get_bool("symmetric", true);
  const std::string scale_dtype = wr.get_string("scale_dtype", "");
  if (!scale_dtype.empty()) {
    wr.fail("scale_dtype",
            "explicit scale dtypes are not supported (scales are counted at the "
            "checkpoint dtype)");
  }
  if (wr.has("zp_dtype")) wr.fail("zp_dtype", "explicit zero-point dtypes are not supported");
  const double scale_bits = base_bits(base);
  Scheme s;
  if (type == "int") {
    if (bits != 4 && bits != 8)
      wr.fail("num_bits",
              "int weights of " + std::to_string(bits) + " bits are not supported (valid: 4, 8)");
    if (format != "pack-quantized" && format != "int-quantized" && format != "naive-quantized") {
      g.fail("weights",
             "int weights need format pack-quantized, int-quantized or "
             "naive-quantized (got '" +
                 format + "')");
    }
  } else if (type == "float") {
    if (bits != 8)
      wr.fail("num_bits",
              "float weights of " + std::to_string(bits) + " bits are not supported (valid: 8)");
  } else {
    wr.fail("type", "unknown value '" + type + "' (valid: int, float)");
  }
  // Zero points of asymmetric schemes: packed at num_bits in pack-quantized, int8 otherwise.
  const double zp_bits = symmetric ? 0.0 : (format == "pack-quantized" ? bits : 8.0);
  const double b = static_cast<double>(bits);
  std::string label = type + std::to_string(bits);
  if (strategy == "group") {
    const int64_t group = wr.get_int("group_size", 1, int64_t{1} << 20);
    s.bits = b + (scale_bits + zp_bits) / static_cast<double>(group);
    label += " g" + std::to_string(group);
  } else if (strategy == "channel") {
    wr.ignore("group_size");
    s.bits = b + (scale_bits + zp_bits) / static_cast<double>(hidden);
    label += " per-channel";
  } else if (strategy == "tensor") {
    wr.ignore("group_size");
    s.bits = b;
    label += " per-tensor";
  } else if (strategy == "block") {
    const std::vector<int64_t> blk = wr.get_int_array("block_structure", 1, 1 << 16);
    if (blk.size() != 2) wr.fail("block_structure", "expected [rows, cols] for strategy block");
    s.bits = b + scale_bits / static_cast<double>(blk[0] * blk[1]);
    label += " " + std::to_string(blk[0]) + "x" + std::to_string(blk[1]) + " blocks";
  } else {
    wr.fail("strategy", "unknown value '" + strategy + "' (valid: group, channel, tensor, block)");
  }
  if (strategy != "block") wr.ignore("block_structure");
  label += symmetric ? " sym" : " asym";
  label += ", " + std::string(dtype_name(base)) + " scales";
  wr.finish();

  // Activations: none (weight-only: computed at the checkpoint dtype) or 8-bit (computed at
  // FP8, which on the modelled GPUs runs at the INT8 tensor-core rate).
  *activations_quantised = false;
  if (const json* a = g.get_object("input_activations")) {
    HfJsonReader ar = g.child(*a, "input_activations", &kCtWeightNeutral);
    const int64_t abits = ar.get_int("num_bits", 1, 16);
    if (abits != 8) ar.fail("num_bits", "only 8-bit activations are supported");
    for (const char* k : {"type", "strategy", "symmetric", "group_size", "block_structure"}) {
      ar.ignore(k);
    }
    ar.finish();
    *activations_quantised = true;
  }
  if (const json* o = g.get_object("output_activations")) {
    (void)o;
    g.fail("output_activations", "output activation quantisation is not supported");
  }
  s.compute = *activations_quantised || type == "float" ? DType::kFP8 : base;
  s.format = label;
  return s;
}

void read_compressed_tensors(HfJsonReader& q, DType base, const ModelCard& card,
                             bool router_is_linear, Precision* p) {
  const std::string format = q.get_string("format");
  if (q.has("kv_cache_scheme")) {
    q.fail("kv_cache_scheme", "KV-cache quantisation is not supported by the import");
  }
  if (const json* sp = q.get_object("sparsity_config")) {
    if (!sp->empty()) q.fail("sparsity_config", "sparse checkpoints are not supported");
  }
  if (q.has("transform_config")) q.fail("transform_config", "transforms are not supported");
  const ModuleSet ignored =
      classify_list(q, "ignore", q.get_string_array("ignore"), /*allow_partial=*/false);
  const json* groups = q.get_object("config_groups");
  if (groups == nullptr || groups->empty()) {
    q.fail("config_groups", "missing required key (a non-empty object of quantisation groups)");
  }
  HfJsonReader gr = q.child(*groups, "config_groups", nullptr);
  // Class-name targets ("Linear") first, regex targets override them (compressed-tensors'
  // precedence).
  for (int pass = 0; pass < 2; ++pass) {
    for (auto it = groups->begin(); it != groups->end(); ++it) {
      gr.ignore(it.key());
      if (!it->is_object()) gr.fail(it.key(), "expected an object");
      HfJsonReader g = gr.child(*it, it.key(), nullptr);
      const std::vector<std::string> targets = g.get_string_array("targets");
      if (targets.empty()) g.fail("targets", "missing required key (array of module targets)");
      ModuleSet modules{};
      bool any = false;
      for (const std::string& t : targets) {
        const bool is_class = t == "Linear";
        if (is_class != (pass == 0)) continue;
        any = true;
        if (is_class) {
          modules = all_linear(router_is_linear);
        } else {
          const ModuleSet one = classify_list(g, "targets", {t}, /*allow_partial=*/false);
          for (size_t i = 0; i < modules.size(); ++i) modules[i] = modules[i] || one[i];
        }
      }
      const std::string group_format = g.get_string("format", format);
      bool act = false;
      const Scheme s = read_ct_weights(g, base, card.hidden_size, group_format, &act);
      g.finish();
      if (any) apply(minus(modules, ignored), s, base, card, p);
    }
  }
  gr.finish();
}

// ---- gptq / awq ---------------------------------------------------------------------------

const std::set<std::string, std::less<>> kGptqNeutral = {"damp_percent",
                                                         "damp_auto_increment",
                                                         "desc_act",
                                                         "static_groups",
                                                         "true_sequential",
                                                         "model_name_or_path",
                                                         "model_file_base_name",
                                                         "use_exllama",
                                                         "exllama_config",
                                                         "use_cuda_fp16",
                                                         "cache_block_outputs",
                                                         "tokenizer",
                                                         "dataset",
                                                         "batch_size",
                                                         "pad_token_id",
                                                         "max_input_length",
                                                         "module_name_preceding_first_block",
                                                         "block_name_to_quantize",
                                                         "backend",
                                                         "meta",
                                                         "quantizer",
                                                         "pack_dtype",
                                                         "act_group_aware",
                                                         "mse",
                                                         "hyb_act",
                                                         "model_seqlen"};
const std::set<std::string, std::less<>> kAwqNeutral = {
    "version", "backend", "do_fuse", "fuse_max_seq_len", "modules_to_fuse", "exllama_config"};

void read_gptq(HfJsonReader& q, DType base, const ModelCard& card, Precision* p) {
  const int64_t bits = q.get_int("bits", 2, 8);
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
    q.fail("bits", "value " + std::to_string(bits) + " is not a GPTQ width (valid: 2, 3, 4, 8)");
  }
  int64_t group = q.get_int("group_size", -1, int64_t{1} << 20, 128);
  if (group == 0) q.fail("group_size", "must be -1 (per channel) or positive");
  const std::string checkpoint_format = q.get_string("checkpoint_format", "gptq");
  if (checkpoint_format != "gptq" && checkpoint_format != "gptq_v2") {
    q.fail("checkpoint_format",
           "unsupported value '" + checkpoint_format + "' (valid: gptq, gptq_v2)");
  }
  q.ignore("sym");  // symmetric GPTQ checkpoints still store packed zero points
  const bool per_channel = group < 0;
  const double g = per_channel ? static_cast<double>(card.hidden_size) : static_cast<double>(group);
  const double b = static_cast<double>(bits);
  const Scheme s{base, b + (16.0 + b) / g + 32.0 / static_cast<double>(card.hidden_size),
                 "gptq int" + std::to_string(bits) +
                     (per_channel ? std::string(" per-channel") : " g" + std::to_string(group)) +
                     ", fp16 scales, packed zeros, g_idx"};
  // Default targets: the decoder blocks' attention and FFN projections (AutoGPTQ's layout;
  // routers stay unquantised); modules_in_block_to_quantize narrows them.
  ModuleSet modules = all_linear(false);
  modules[static_cast<size_t>(Module::kLmHead)] = q.get_bool("lm_head", false);
  if (const json* lists = q.get_raw("modules_in_block_to_quantize")) {
    std::vector<std::string> names;
    if (!lists->is_array()) q.fail("modules_in_block_to_quantize", "expected an array of arrays");
    for (const json& l : *lists) {
      if (!l.is_array()) q.fail("modules_in_block_to_quantize", "expected an array of arrays");
      for (const json& n : l) {
        if (!n.is_string()) q.fail("modules_in_block_to_quantize", "expected module names");
        names.push_back(n.get<std::string>());
      }
    }
    // One listed projection (or expert) quantises its whole tensor group.
    const bool lm_head = modules[static_cast<size_t>(Module::kLmHead)];
    modules = classify_list(q, "modules_in_block_to_quantize", names, /*allow_partial=*/true);
    modules[static_cast<size_t>(Module::kLmHead)] = lm_head;
  }
  apply(minus(modules, classify_list(q, "modules_to_not_convert",
                                     q.get_string_array("modules_to_not_convert"), false)),
        s, base, card, p);
}

void read_awq(HfJsonReader& q, DType base, const ModelCard& card, bool router_is_linear,
              Precision* p) {
  const int64_t bits = q.get_int("bits", 4, 4, 4);
  const int64_t group = q.get_int("group_size", 1, int64_t{1} << 20, 128);
  const bool zero_point = q.get_bool("zero_point", true);
  const double b = static_cast<double>(bits);
  const Scheme s{base, b + (16.0 + (zero_point ? b : 0.0)) / static_cast<double>(group),
                 "awq int" + std::to_string(bits) + " g" + std::to_string(group) + ", fp16 scales" +
                     (zero_point ? ", packed zeros" : "")};
  ModuleSet modules = all_linear(router_is_linear);
  modules[static_cast<size_t>(Module::kLmHead)] = false;
  apply(minus(modules, classify_list(q, "modules_to_not_convert",
                                     q.get_string_array("modules_to_not_convert"), false)),
        s, base, card, p);
}

}  // namespace

DType read_hf_dtype(HfJsonReader& top, HfJsonReader* inner) {
  auto from = [](HfJsonReader& r) -> std::optional<std::pair<std::string, std::string>> {
    const bool has_new = r.has("dtype");
    const bool has_old = r.has("torch_dtype");
    if (!has_new && !has_old) return std::nullopt;
    const std::string key = has_new ? "dtype" : "torch_dtype";
    const std::string v = r.get_string(key);
    if (has_new && has_old && r.get_string("torch_dtype") != v) {
      r.fail("torch_dtype", "disagrees with dtype ('" + v + "')");
    }
    return std::make_pair(key, v);
  };
  HfJsonReader* where = &top;
  auto v = from(top);
  if (inner != nullptr) {
    auto w = from(*inner);
    if (v && w && v->second != w->second) {
      inner->fail(w->first, "disagrees with the top-level " + v->first + " ('" + v->second + "')");
    }
    if (!v && w) {
      v = w;
      where = inner;
    }
  }
  if (!v) return DType::kBF16;
  if (v->second == "bfloat16") return DType::kBF16;
  if (v->second == "float16") return DType::kFP16;
  if (v->second == "float32") return DType::kFP32;
  where->fail(v->first, "unknown value '" + v->second + "' (valid: bfloat16, float16, float32)");
}

Precision read_hf_precision(HfJsonReader& top, DType base, const ModelCard& card,
                            bool router_is_linear) {
  Precision p;
  p.attention = p.dense_ffn = p.routed_experts = p.shared_experts = p.embeddings = base;
  p.router = base;
  p.kv_cache = base;
  const json* q = top.get_object("quantization_config");
  if (q == nullptr) {
    p.router.reset();
    return p;
  }
  HfJsonReader qr = top.child(*q, "quantization_config", nullptr);
  const std::string method = qr.get_string("quant_method");
  if (method == "fp8") {
    read_fp8(qr, base, card, router_is_linear, &p);
  } else if (method == "mxfp4") {
    read_mxfp4(qr, base, card, &p);
  } else if (method == "compressed-tensors") {
    for (const auto& k : kCtNeutral) qr.ignore(k);
    read_compressed_tensors(qr, base, card, router_is_linear, &p);
  } else if (method == "gptq") {
    for (const auto& k : kGptqNeutral) qr.ignore(k);
    read_gptq(qr, base, card, &p);
  } else if (method == "awq") {
    for (const auto& k : kAwqNeutral) qr.ignore(k);
    read_awq(qr, base, card, router_is_linear, &p);
  } else {
    qr.fail("quant_method", "unsupported quant_method '" + method +
                                "' (valid: fp8, mxfp4, compressed-tensors, gptq, awq)");
  }
  qr.finish();
  // An unset router precision means "as the shared experts": keep the card equal to a TOML card
  // of the same precision when the router was not quantised apart.
  if (p.router == p.shared_experts &&
      p.storage[static_cast<size_t>(TensorGroup::kRouter)] ==
          p.storage[static_cast<size_t>(TensorGroup::kSharedExperts)]) {
    p.router.reset();
  }
  return p;
}

}  // namespace moesim::sim
