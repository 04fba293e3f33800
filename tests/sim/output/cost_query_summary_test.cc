#include "sim/output/cost_query_summary.h"

#include <gtest/gtest.h>

#include <sstream>

namespace moesim::sim::output {
namespace {

RunCounters counters() {
  RunCounters c;
  c.cost_out_of_range_queries = 7;
  c.cost_by_rule_queries = 12;
  c.cost_out_of_range_by_kind = {{"expert_ffn", 7}};
  c.cost_by_rule_by_kind = {{"rmsnorm", 10}, {"combine", 2}};
  return c;
}

TEST(CostQuerySummary, JsonListsTheTotalsAndTheNonzeroKinds) {
  nlohmann::json j = nlohmann::json::object();
  add_cost_query_json(j, counters());
  EXPECT_EQ(j["cost_by_rule_queries"], 12);
  EXPECT_EQ(j["cost_out_of_range_by_kind"], (nlohmann::json{{"expert_ffn", 7}}));
  EXPECT_EQ(j["cost_by_rule_by_kind"], (nlohmann::json{{"combine", 2}, {"rmsnorm", 10}}));
  nlohmann::json none = nlohmann::json::object();
  add_cost_query_json(none, RunCounters{});
  EXPECT_TRUE(none["cost_out_of_range_by_kind"].is_object());
  EXPECT_TRUE(none["cost_out_of_range_by_kind"].empty());
}

TEST(CostQuerySummary, TextNamesTheProfileAndEachNonzeroKind) {
  CostSpec spec;
  spec.kind = CostModelKind::kCalibrated;
  spec.profile_path = "p.toml";
  std::ostringstream os;
  write_cost_query_text(os, spec, counters());
  EXPECT_EQ(os.str(),
            "  cost model  calibrated profile p.toml: 7 queries outside the fitted ranges, 12 "
            "priced by a stated rule (docs/calibration.md)\n"
            "              outside: expert_ffn 7\n"
            "              by rule: combine 2, rmsnorm 10\n");
  std::ostringstream roofline;
  write_cost_query_text(roofline, CostSpec{}, RunCounters{});
  EXPECT_EQ(roofline.str(), "  cost model  roofline (0 queries outside a fitted range)\n");
}

}  // namespace
}  // namespace moesim::sim::output
