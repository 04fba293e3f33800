// Module names and patterns -> tensor groups (sim/model/hf_quant_modules.h): the spellings of
// transformers, AutoGPTQ, AutoAWQ and llm-compressor map to the same groups; names of part of a
// group are flagged partial; a scheme sets exactly the groups it is applied to.
#include "sim/model/hf_quant_modules.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace moesim::sim::hf_quant {
namespace {

struct Classified {
  std::optional<Module> module;
  bool partial = false;
};

Classified classify(const std::string& pattern) {
  Classified c;
  c.module = classify_module(pattern, &c.partial);
  return c;
}

TEST(HfQuantModules, SpellingsOfOneGroupMapAlike) {
  for (const char* p : {"self_attn", "model.layers.*.self_attn", "re:.*self_attn$",
                        "language_model.model.layers.*.self_attn.*"}) {
    const Classified c = classify(p);
    EXPECT_EQ(c.module, Module::kAttention) << p;
    EXPECT_FALSE(c.partial) << p;
  }
  EXPECT_EQ(classify("re:.*mlp\\.experts\\..*").module, Module::kRoutedExperts);
  EXPECT_EQ(classify("mlp.shared_experts").module, Module::kSharedExperts);
  EXPECT_EQ(classify("mlp.shared_expert").module, Module::kSharedExperts);
  EXPECT_EQ(classify("model.layers.*.mlp.gate").module, Module::kRouter);
  EXPECT_EQ(classify("lm_head").module, Module::kLmHead);
  EXPECT_EQ(classify("mlp.(gate|up|gate_up|down)_proj").module, Module::kDenseFfn);
}

TEST(HfQuantModules, PartsOfAGroupAreFlagged) {
  EXPECT_TRUE(classify("self_attn.q_proj").partial);
  EXPECT_TRUE(classify("mlp.experts.0.up_proj").partial);
  EXPECT_TRUE(classify("model.layers.0.mlp.experts").partial);
  EXPECT_TRUE(classify("mlp.up_proj").partial);
  EXPECT_FALSE(classify("mlp.experts.*").partial);
}

TEST(HfQuantModules, OutsideTheTextModelIsNotModelledAndUnknownIsUnmapped) {
  EXPECT_EQ(classify("vision_tower").module, Module::kNotModelled);
  EXPECT_EQ(classify("model.embed_tokens").module, Module::kNotModelled);
  EXPECT_EQ(classify("mtp.layers.0").module, Module::kNotModelled);
  EXPECT_EQ(classify("conv1d").module, std::nullopt);
}

TEST(HfQuantModules, LinearReachesTheRouterOnlyWhenItIsALinear) {
  EXPECT_TRUE(all_linear(true)[static_cast<size_t>(Module::kRouter)]);
  EXPECT_FALSE(all_linear(false)[static_cast<size_t>(Module::kRouter)]);
  ModuleSet experts{};
  experts[static_cast<size_t>(Module::kRoutedExperts)] = true;
  const ModuleSet rest = minus(all_linear(false), experts);
  EXPECT_FALSE(rest[static_cast<size_t>(Module::kRoutedExperts)]);
  EXPECT_TRUE(rest[static_cast<size_t>(Module::kAttention)]);
}

TEST(HfQuantModules, ApplySetsOnlyTheNamedGroups) {
  ModelCard card;
  card.tie_word_embeddings = false;
  Precision p;
  ModuleSet modules{};
  modules[static_cast<size_t>(Module::kRoutedExperts)] = true;
  modules[static_cast<size_t>(Module::kLmHead)] = true;
  apply(modules, {DType::kFP8, 8.5, "fp8 test"}, DType::kBF16, card, &p);
  EXPECT_EQ(p.routed_experts, DType::kFP8);
  EXPECT_EQ(p.storage[static_cast<size_t>(TensorGroup::kRoutedExperts)].bits_per_element, 8.5);
  EXPECT_EQ(p.attention, Precision{}.attention);
  // The untied head shares the embeddings group with the BF16 input table: the mean of both.
  EXPECT_EQ(p.storage[static_cast<size_t>(TensorGroup::kEmbeddings)].bits_per_element,
            (16.0 + 8.5) / 2.0);
}

}  // namespace
}  // namespace moesim::sim::hf_quant
