// quantization_config -> Precision. Each method (fp8, mxfp4, compressed-tensors, gptq, awq)
// names which module classes it quantises and how many bits one weight element costs once packed
// values, scales, zero points and permutation indices are counted. Per-channel scales and GPTQ's
// g_idx depend on each matrix's shape; both are counted with hidden_size for that width. The
// bits per method and the error of that approximation: docs/models.md, "Quantised checkpoints".
#include "sim/model/hf_quantization.h"

#include <set>

#include "sim/config/config_error.h"
#include "sim/model/hf_compressed_tensors.h"
#include "sim/model/hf_quant_modules.h"

namespace moesim::sim {
namespace {

using hf_quant::all_linear;
using hf_quant::apply;
using hf_quant::classify_list;
using hf_quant::minus;
using hf_quant::Module;
using hf_quant::ModuleSet;
using hf_quant::Scheme;
using nlohmann::json;

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
    hf_quant::read_compressed_tensors(qr, base, card, router_is_linear, &p);
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
