// Internal to sim/model: the tensor groups that a quantization_config's module names reach
// (HuggingFace module names, globs and "re:" patterns mapped to the card's groups), and one
// quantisation scheme applied to a set of groups. Shared by the method readers
// (hf_quantization.cc, hf_compressed_tensors.cc); docs/models.md ("Quantised checkpoints").
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/model/hf_json_reader.h"
#include "sim/model/model_card.h"

namespace moesim::sim::hf_quant {

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

// The module class a name or pattern names; nullopt when it cannot be mapped. `partial` is set
// when it names only part of a class (one projection of attention, one expert, one layer).
std::optional<Module> classify_module(const std::string& pattern, bool* partial);

// Maps every entry of the string array `key`; an entry naming part of a class is an error
// unless `allow_partial` (then the whole class counts as named).
ModuleSet classify_list(HfJsonReader& r, std::string_view key,
                        const std::vector<std::string>& entries, bool allow_partial);

// Every class a "Linear" target reaches.
ModuleSet all_linear(bool router_is_linear);

// The classes of `a` that `b` does not name.
ModuleSet minus(ModuleSet a, const ModuleSet& b);

// One quantisation scheme applied to a set of module classes.
struct Scheme {
  DType compute;  // the dtype the cost model computes in
  double bits;    // stored bits per weight element
  std::string format;
};

// Sets every group of `modules` in *p to scheme `s` (compute dtype and stored bits). An untied
// lm_head makes the embeddings group the mean of `base` (the input table, never quantised) and
// `s`.
void apply(const ModuleSet& modules, const Scheme& s, DType base, const ModelCard& card,
           Precision* p);

}  // namespace moesim::sim::hf_quant
