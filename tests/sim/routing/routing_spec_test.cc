#include "sim/routing/routing_spec.h"

#include <gtest/gtest.h>

#include "sim/config/toml_source.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

const RoutingShape kDeepSeek{58, 256, 8, 8, 4};

RoutingSpec parse(const std::string& text) {
  auto doc = TomlDocument::parse_string(text, "t.toml");
  TomlTable root = doc.root();
  TomlTable routing = root.get_table("routing");
  RoutingSpec spec = parse_routing(routing, kDeepSeek);
  root.finish();
  return spec;
}

TEST(RoutingSpec, ParsesEveryKeyAndOverridesAPreset) {
  const RoutingSpec spec = parse(R"(
[routing]
preset = "staged-drift"
zipf_s = 0.8
sampling = "auto"
per_token_max_tokens = 16
[routing.coactivation]
prob = 0.25
[routing.drift]
mean_epoch_steps = 40
epoch_cv = 0.0
[routing.stages]
shallow_end = 0.1
deep_start = 0.9
skew_scale = [0.5, 1, 2]
coactivation_scale = [0, 1, 1]
[[routing.domains]]
name = "code"
weight = 2
[[routing.domains]]
name = "chat"
[[routing.layer_overrides]]
layers = [50, 57]
popularity = "dirichlet"
dirichlet_alpha = 0.1
)");
  EXPECT_EQ(spec.preset, "staged-drift");
  EXPECT_EQ(spec.defaults.popularity, PopularityKind::kZipf);
  EXPECT_DOUBLE_EQ(spec.defaults.zipf_s, 0.8);
  EXPECT_EQ(spec.defaults.coactivation.cluster_size, 4);  // from the preset
  EXPECT_DOUBLE_EQ(spec.defaults.coactivation.prob, 0.25);
  EXPECT_TRUE(spec.defaults.drift.enabled);
  EXPECT_DOUBLE_EQ(spec.defaults.drift.mean_epoch_steps, 40);
  EXPECT_EQ(spec.sampling, SamplingMode::kAuto);
  EXPECT_EQ(spec.per_token_max_tokens, 16);
  ASSERT_EQ(spec.domains.size(), 2u);
  EXPECT_EQ(spec.domains[0].name, "code");
  EXPECT_DOUBLE_EQ(spec.domains[1].weight, 1.0);
  ASSERT_EQ(spec.layer_overrides.size(), 1u);
  // Effective per-layer skew: stage scaling on top of defaults / overrides.
  const LayerSkewSpec shallow = spec.layer_skew(0, 58);
  EXPECT_DOUBLE_EQ(shallow.zipf_s, 0.4);
  EXPECT_DOUBLE_EQ(shallow.coactivation.prob, 0.0);
  const LayerSkewSpec middle = spec.layer_skew(20, 58);
  EXPECT_DOUBLE_EQ(middle.zipf_s, 0.8);
  const LayerSkewSpec deep = spec.layer_skew(57, 58);
  EXPECT_EQ(deep.popularity, PopularityKind::kDirichlet);
  EXPECT_DOUBLE_EQ(deep.dirichlet_alpha, 0.05);  // 0.1 / deep scale 2
}

TEST(RoutingSpec, PresetsAreValid) {
  for (const std::string& name : routing_preset_names()) {
    validate_routing_spec(routing_preset(name), kDeepSeek, name);
  }
}

TEST(RoutingSpec, ShapeValidation) {
  EXPECT_NE(config_error_of([] {
              validate_routing_shape({1, 256, 8, 7, 4}, "m");
            }).find("num_groups"),
            std::string::npos);
  EXPECT_NE(config_error_of([] {
              validate_routing_shape({1, 256, 8, 8, 9}, "m");
            }).find("topk_groups"),
            std::string::npos);
  EXPECT_NE(config_error_of([] {
              validate_routing_shape({1, 16, 8, 8, 1}, "m");
            }).find("topk_groups * experts per group"),
            std::string::npos);
}

struct BadFile {
  const char* file;
  const char* expected;  // substring of the error
};

class BadRoutingFiles : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadRoutingFiles, ErrorNamesFileKeyAndReason) {
  const std::string path =
      std::string(MOESIM_SOURCE_DIR) + "/tests/data/bad/routing/" + GetParam().file;
  const std::string e = config_error_of([&] {
    auto doc = TomlDocument::load_file(path);
    TomlTable root = doc.root();
    TomlTable routing = root.get_table("routing");
    parse_routing(routing, kDeepSeek);
  });
  EXPECT_EQ(e.rfind(path + ":", 0), 0u) << e;
  EXPECT_NE(e.find(GetParam().expected), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadRoutingFiles,
    ::testing::Values(
        BadFile{"unknown_preset.toml",
                "routing.preset: unknown preset 'deepseek-v4' (valid: uniform, "
                "deepseek-v3-decode, staged-drift)"},
        BadFile{"cluster_not_dividing.toml",
                "routing.coactivation.cluster_size: must be 0 or >= 2 and divide the experts "
                "per group (32), got 5"},
        BadFile{"override_out_of_range.toml", "routing.layer_overrides[0].layers"},
        BadFile{"unknown_key.toml", "routing.zipf_exponent: unknown key 'zipf_exponent'"},
        BadFile{"stage_scale_size.toml",
                "routing.stages.skew_scale: expected 3 values (shallow, middle, deep), got 2"}),
    [](const auto& info) { return "file" + std::to_string(info.index); });

}  // namespace
}  // namespace moesim::sim
