#include "sim/study/overrides.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <filesystem>
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

// without(): a removed table is gone from the parsed scenario (its defaults apply), a removed
// value takes its default, the template itself is unchanged, and an absent path is an error.
TEST(Overrides, WithoutRemovesKeysAndTables) {
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  const std::vector<std::string> drop = {"slo", "scheduler.max_seqs"};
  Scenario sc = t.without(drop).instantiate({});
  Scenario base = t.instantiate({});
  EXPECT_EQ(base.scheduler.max_seqs, 4);
  EXPECT_EQ(sc.scheduler.max_seqs, SchedulerSpec{}.max_seqs);
  EXPECT_DOUBLE_EQ(base.slo.ttft_ms, 200);
  EXPECT_DOUBLE_EQ(sc.slo.ttft_ms, SloSpec{}.ttft_ms);
  // Overrides apply on top of the removal.
  Scenario with =
      t.without(drop).instantiate(std::vector<Override>{{"scheduler.max_seqs", int64_t{7}}});
  EXPECT_EQ(with.scheduler.max_seqs, 7);
  const std::vector<std::string> absent = {"policies.concurrency_cap"};
  const std::string e = testing::config_error_of([&] { t.without(absent); });
  EXPECT_NE(e.find("tiny.toml"), std::string::npos) << e;
  EXPECT_NE(e.find("policies.concurrency_cap"), std::string::npos) << e;
  EXPECT_NE(e.find("no such key or table to remove"), std::string::npos) << e;
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

TEST(Overrides, ParseOverrideReadsValuesAsToml) {
  auto value_of = [](const std::string& text) { return parse_override(text, "--set").value; };
  EXPECT_EQ(parse_override("deployment.replicas=2", "--set").key_path, "deployment.replicas");
  EXPECT_EQ(value_of("a=2"), OverrideValue(int64_t{2}));
  EXPECT_EQ(value_of("a=0.5"), OverrideValue(0.5));
  EXPECT_EQ(value_of("a=1e3"), OverrideValue(1000.0));
  EXPECT_EQ(value_of("a=true"), OverrideValue(true));
  EXPECT_EQ(value_of("a=\"2\""), OverrideValue(std::string("2")));  // quoted: a string
  EXPECT_EQ(value_of("a=least_loaded"), OverrideValue(std::string("least_loaded")));
  EXPECT_EQ(value_of("a=x=y"), OverrideValue(std::string("x=y")));  // split at the first '='
  EXPECT_EQ(value_of("a="), OverrideValue(std::string("")));
  const std::string err =
      testing::config_error_of([] { parse_override("deployment.replicas", "--set"); });
  EXPECT_NE(err.find("is not KEY.PATH=VALUE"), std::string::npos) << err;
  // Empty segments are instantiate()'s error, as for every override.
  ScenarioTemplate t = ScenarioTemplate::load(kScenario);
  EXPECT_NE(error_of(t, {parse_override("scheduler..max_seqs=1", "--set")}).find("empty segment"),
            std::string::npos);
}

TEST(Overrides, FromTableIsTheFile) {
  const std::string dir = std::filesystem::path(kScenario).parent_path().string();
  ScenarioTemplate t =
      ScenarioTemplate::from_table(toml::parse_file(kScenario), dir + "/<scenario dict>", dir);
  EXPECT_FALSE(t.from_file());
  EXPECT_TRUE(ScenarioTemplate::load(kScenario).from_file());
  Scenario a = t.instantiate({});
  Scenario b = load_scenario(kScenario);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.model_path, b.model_path);  // relative paths resolve against base_dir
  EXPECT_EQ(a.topology_path, b.topology_path);
  EXPECT_EQ(a.scheduler.max_seqs, b.scheduler.max_seqs);
  EXPECT_EQ(
      t.instantiate(std::vector<Override>{{"scheduler.max_seqs", int64_t{9}}}).scheduler.max_seqs,
      9);
  // Errors name the dict's name, with no line number and no "(with overrides ...)" when none.
  toml::table bad = toml::parse_file(kScenario);
  bad["scheduler"].as_table()->insert_or_assign("max_seqz", 3);
  ScenarioTemplate tb = ScenarioTemplate::from_table(bad, "<scenario dict>", dir);
  try {
    tb.instantiate({});
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "<scenario dict>");
    EXPECT_EQ(e.key_path(), "scheduler.max_seqz");
    EXPECT_EQ(e.line(), 0);
    EXPECT_EQ(std::string(e.what()).find("with overrides"), std::string::npos) << e.what();
  }
}

TEST(Overrides, SyntaxErrorOnLoad) {
  EXPECT_THROW(
      ScenarioTemplate::load(std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/nope.toml"),
      ConfigError);
}

}  // namespace
}  // namespace moesim::sim::study
