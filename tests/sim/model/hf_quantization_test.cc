// quantization_config import (sim/model/hf_quantization.cc) through parse_hf_config: which
// groups each method quantises, their stored bits, and the errors for what is not supported.
// The corpus checkpoints' bytes are pinned in hf_corpus_test.cc.
#include "sim/model/hf_quantization.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/model/hf_config.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

// A small valid Mixtral config with `extra` spliced in before the closing brace.
std::string mixtral_with(const std::string& extra) {
  return R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
    "intermediate_size": 32, "vocab_size": 10, "max_position_embeddings": 16)" +
         extra + "}";
}

std::string error_of(const std::string& extra) {
  return testing::config_error_of([&] { parse_hf_config(mixtral_with(extra), "config.json"); });
}

TEST(HfQuantization, UnsupportedQuantisationIsAnErrorNotAGuess) {
  EXPECT_EQ(error_of(R"(, "quantization_config": {"quant_method": "fp8", "fmt": "e3m4"})"),
            "config.json:3:126: quantization_config.fmt: unknown value 'e3m4' (valid: e4m3, "
            "e5m2)");
  EXPECT_EQ(error_of(R"(, "quantization_config": {"quant_method": "gptq", "bits": 5})"),
            "config.json:3:127: quantization_config.bits: value 5 is not a GPTQ width (valid: 2, "
            "3, 4, 8)");
  EXPECT_EQ(error_of(R"(, "quantization_config": {"quant_method": "awq", "bits": 4,
    "modules_to_not_convert": ["model.layers.0.mlp.experts"]})"),
            "config.json:4:5: quantization_config.modules_to_not_convert: module "
            "'model.layers.0.mlp.experts' names part of a tensor group (one projection, expert "
            "or layer); per-module precision inside a group is not supported");
  EXPECT_EQ(error_of(R"(, "quantization_config": {"quant_method": "awq", "bits": 4,
    "version": "gemm", "zero_pont": true})"),
            "config.json:4:24: quantization_config.zero_pont: unknown key 'zero_pont' (not read "
            "and not on the ignore list; did you mean 'zero_point'?)");
  const std::string ct = R"(, "quantization_config": {"quant_method": "compressed-tensors",
    "format": "pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
    "weights": {"num_bits": 4, "type": "int", "strategy": )";
  EXPECT_EQ(error_of(ct + R"("tensor_group", "group_size": 16}}}})"),
            "config.json:5:47: quantization_config.config_groups.group_0.weights.strategy: "
            "unknown value 'tensor_group' (valid: group, channel, tensor, block)");
  EXPECT_EQ(error_of(ct + R"("group", "group_size": 32}}}, "kv_cache_scheme": {"num_bits": 8}})"),
            "config.json:5:89: quantization_config.kv_cache_scheme: KV-cache quantisation is not "
            "supported by the import");
}

TEST(HfQuantization, CompressedTensorsGroupsAndTargets) {
  // int8 per-channel W8A8 on everything but the router: computed at FP8, 8 bits + one bf16
  // scale per hidden_size weights.
  const ModelCard w8a8 = parse_hf_config(
      mixtral_with(R"(, "quantization_config": {"quant_method": "compressed-tensors",
    "format": "int-quantized", "ignore": ["re:.*block_sparse_moe.gate$", "lm_head"],
    "config_groups": {"group_0": {"targets": ["Linear"],
    "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": true},
    "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": true,
    "symmetric": true}}}})"),
      "w8a8.json");
  EXPECT_EQ(w8a8.precision.routed_experts, DType::kFP8);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(w8a8.precision, TensorGroup::kRoutedExperts),
                   8.0 + 16.0 / 64.0);
  EXPECT_EQ(tensor_group_dtype(w8a8.precision, TensorGroup::kRouter), DType::kBF16);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(w8a8.precision, TensorGroup::kEmbeddings), 16.0);
  // A regex target overrides the class target: experts int4 g128 asym (zero points packed),
  // attention int8 per-tensor; lm_head quantised, so the embeddings group is the mean of a BF16
  // input table and an int8 head.
  const ModelCard mixed = parse_hf_config(
      mixtral_with(R"(, "quantization_config": {"quant_method": "compressed-tensors",
    "format": "pack-quantized", "config_groups": {
    "group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "int", "strategy": "tensor", "symmetric": true}},
    "group_1": {"targets": ["re:.*block_sparse_moe\\.experts\\..*"],
      "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
      "symmetric": false}}}})"),
      "mixed.json");
  EXPECT_DOUBLE_EQ(weight_bits_per_element(mixed.precision, TensorGroup::kRoutedExperts),
                   4.0 + (16.0 + 4.0) / 128.0);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(mixed.precision, TensorGroup::kAttention), 8.0);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(mixed.precision, TensorGroup::kRouter), 8.0);
  EXPECT_DOUBLE_EQ(weight_bits_per_element(mixed.precision, TensorGroup::kEmbeddings),
                   (16.0 + 8.0) / 2.0);
  EXPECT_EQ(mixed.precision.routed_experts, DType::kBF16);  // weight-only: computed in BF16
}

}  // namespace
}  // namespace moesim::sim
