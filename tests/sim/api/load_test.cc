#include "sim/api/load.h"

#include <gtest/gtest.h>

#include "sim/api/usage_error.h"
#include "sim/config/config_error.h"

namespace moesim::sim::api {
namespace {

const std::string kTiny = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

TEST(ApiLoad, AFileAsItIsOrThroughItsTemplate) {
  ScenarioSource source;
  source.path = kTiny;
  const LoadedScenario plain = load(source);
  EXPECT_EQ(plain.source_template, nullptr);
  EXPECT_FALSE(plain.resolved_text().has_value());
  EXPECT_EQ(plain.scenario.scheduler.max_seqs, 4);

  source.overrides = {study::parse_override("scheduler.max_seqs=6", "--set")};
  source.dropped = {"slo"};
  const LoadedScenario changed = load(source);
  EXPECT_EQ(changed.scenario.scheduler.max_seqs, 6);
  ASSERT_TRUE(changed.resolved_text().has_value());
  EXPECT_EQ(changed.resolved_text()->find("[slo]"), std::string::npos);
  EXPECT_EQ(load_template({kTiny, nullptr, {}, {}}).scenario.scheduler.max_seqs, 4);

  ScenarioSource held;
  held.held = std::make_shared<const study::ScenarioTemplate>(study::ScenarioTemplate::load(kTiny));
  EXPECT_EQ(held.name(), kTiny);
  EXPECT_TRUE(load(held).resolved_text().has_value());
}

TEST(ApiLoad, ModelShowChecksTheContext) {
  ModelShowRequest r;
  r.card_path = std::string(MOESIM_SOURCE_DIR) + "/models/tiny.toml";
  EXPECT_GT(model_show(r).total_params, 0);
  r.context_tokens = 0;
  try {
    model_show(r);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_EQ(e.message.rfind("--context 0 is out of range [1, ", 0), 0u) << e.message;
  }
  EXPECT_THROW(topo_show(r.card_path), ConfigError);
}

}  // namespace
}  // namespace moesim::sim::api
