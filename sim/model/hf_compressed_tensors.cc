// compressed-tensors: each config group's scheme applied to its targets (hf_compressed_tensors.h).
#include "sim/model/hf_compressed_tensors.h"

#include <set>

#include "sim/model/hf_quant_modules.h"

namespace moesim::sim::hf_quant {
namespace {

using nlohmann::json;

double base_bits(DType base) { return bits_per_element(base); }

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

}  // namespace

void read_compressed_tensors(HfJsonReader& q, DType base, const ModelCard& card,
                             bool router_is_linear, Precision* p) {
  for (const auto& k : kCtNeutral) q.ignore(k);
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

}  // namespace moesim::sim::hf_quant
