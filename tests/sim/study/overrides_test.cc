#include "sim/study/overrides.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/config_errors.h"

namespace moesim::sim::study {
namespace {

const std::string kScenario = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/tiny.toml";

std::string error_of(const ScenarioTemplate& t, std::vector<Override> overrides) {
  return testing::config_error_of([&] { t.instantiate(overrides); });
}

TEST(Overrides, ValueText) {
  EXPECT_EQ(override_value_text(int64_t{42}), "42");
  EXPECT_EQ(override_value_text(0.1), "0.1");
  EXPECT_EQ(override_value_text(8.0), "8");
  EXPECT_EQ(override_value_text(true), "true");
  EXPECT_EQ(override_value_text(std::string("round_robin")), "round_robin");
  std::vector<Override> o = {{"a.b", int64_t{1}}, {"c", std::string("x")}};
  EXPECT_EQ(overrides_text(o), "a.b=1, c=x");
  EXPECT_EQ(overrides_text({}), "(base)");
}

TEST(Overrides, WithoutOverridesIsTheFile) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  Scenario a = t.instantiate({});
  Scenario b = load_scenario(kScenario);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.deployment.num_replicas, b.deployment.num_replicas);
  EXPECT_EQ(a.scheduler.max_seqs, b.scheduler.max_seqs);
}

TEST(Overrides, ChangesValuesAndCreatesTables) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  Scenario sc = t.instantiate(std::vector<Override>{
      {"deployment.replicas", int64_t{3}},
      {"scheduler.router", std::string("round_robin")},
      {"workload.arrival.rate_per_s", 12.5},
      {"network.model", std::string("fluid")},  // no [network] table in the file
      {"run.duration_s", 0.75}});
  EXPECT_EQ(sc.deployment.num_replicas, 3);
  EXPECT_EQ(sc.scheduler.router, RouterPolicy::kRoundRobin);
  EXPECT_DOUBLE_EQ(sc.workload.synthetic.arrival.rate_per_s, 12.5);
  EXPECT_EQ(sc.network_model, "fluid");
  EXPECT_DOUBLE_EQ(sc.run.duration_s, 0.75);
  // Untouched values and relative paths survive re-serialisation.
  EXPECT_EQ(sc.scheduler.max_seqs, 4);
  EXPECT_EQ(sc.model->name, "tiny");
  EXPECT_EQ(sc.source_file, kScenario);
}

TEST(Overrides, LaterOverrideWins) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  Scenario sc = t.instantiate(std::vector<Override>{{"scheduler.max_seqs", int64_t{7}},
                                                    {"scheduler.max_seqs", int64_t{9}}});
  EXPECT_EQ(sc.scheduler.max_seqs, 9);
}

TEST(Overrides, UnknownKeyNamesPathAndOverrides) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  std::string err = error_of(t, {{"scheduler.max_seqz", int64_t{3}}});
  EXPECT_NE(err.find("unknown key 'max_seqz'"), std::string::npos) << err;
  EXPECT_NE(err.find("scheduler.max_seqz"), std::string::npos) << err;
  EXPECT_NE(err.find("with overrides scheduler.max_seqz=3"), std::string::npos) << err;
  EXPECT_EQ(err.rfind(kScenario + ": ", 0), 0u) << err;  // no misleading line number

  err = error_of(t, {{"schedulr.max_seqs", int64_t{3}}});
  EXPECT_NE(err.find("unknown key 'schedulr'"), std::string::npos) << err;
}

TEST(Overrides, BadValuesAreParserErrors) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  std::string err = error_of(t, {{"scheduler.max_seqs", int64_t{0}}});
  EXPECT_NE(err.find("scheduler.max_seqs"), std::string::npos) << err;
  EXPECT_NE(err.find("out of range"), std::string::npos) << err;
  err = error_of(t, {{"scheduler.max_seqs", std::string("many")}});
  EXPECT_NE(err.find("expected an integer"), std::string::npos) << err;
}

TEST(Overrides, PathsThroughValuesOrOntoTablesAreErrors) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  std::string err = error_of(t, {{"name.x", int64_t{1}}});
  EXPECT_NE(err.find("name is not a table"), std::string::npos) << err;
  err = error_of(t, {{"workload.arrival", int64_t{1}}});
  EXPECT_NE(err.find("names a table"), std::string::npos) << err;
  err = error_of(t, {{"scheduler..max_seqs", int64_t{1}}});
  EXPECT_NE(err.find("empty segment"), std::string::npos) << err;
}

TEST(Overrides, TextWithKeepsTheTemplate) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  std::vector<Override> o = {{"scheduler.max_seqs", int64_t{77}}};
  EXPECT_NE(t.text_with(o).find("max_seqs = 77"), std::string::npos);
  EXPECT_EQ(t.text_with({}).find("max_seqs = 77"), std::string::npos);
  EXPECT_EQ(t.instantiate({}).scheduler.max_seqs, 4);
}

TEST(Overrides, SyntaxErrorOnLoad) {
  EXPECT_THROW(
      ScenarioTemplate::load(std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/nope.toml"),
      ConfigError);
}

}  // namespace
}  // namespace moesim::sim::study
