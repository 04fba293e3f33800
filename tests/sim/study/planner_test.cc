#include "sim/study/planner.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/scenario/scenario.h"
#include "sim/study/csv.h"
#include "tests/support/config_errors.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim::study {
namespace {

PlanEntry entry(int64_t idx, int64_t gpus, double out_tps, double ttft, double tpot,
                bool feasible = true, std::optional<double> price = std::nullopt) {
  PlanEntry e;
  e.config_idx = idx;
  e.num_gpus = gpus;
  e.input_tokens_per_s = 10 * out_tps;
  e.output_tokens_per_s = out_tps;
  e.ttft_p99_ms = ttft;
  e.tpot_p99_ms = tpot;
  e.feasible = feasible;
  e.price = price ? GpuPrice{price, "flag"} : GpuPrice{};
  e.cost = cost_figures(gpus, e.input_tokens_per_s, e.output_tokens_per_s, e.price);
  return e;
}

// GPUs x 1e6 / (tokens/s x 3600) GPU-hours per million tokens, times the price for dollars;
// absent without throughput data, at 0 tokens/s and (dollars) without a price.
TEST(Planner, CostFigures) {
  const CostFigures c = cost_figures(8, 4000.0, 1000.0, GpuPrice{2.0, "flag"});
  EXPECT_DOUBLE_EQ(*c.input_tokens_per_s_per_gpu, 500);
  EXPECT_DOUBLE_EQ(*c.output_tokens_per_s_per_gpu, 125);
  EXPECT_DOUBLE_EQ(*c.gpu_hours_per_m_output_tokens, 8 * 1e6 / (1000 * 3600.0));
  EXPECT_DOUBLE_EQ(*c.gpu_hours_per_m_input_tokens, 8 * 1e6 / (4000 * 3600.0));
  EXPECT_DOUBLE_EQ(*c.usd_per_m_output_tokens, 2 * 8 * 1e6 / (1000 * 3600.0));
  const CostFigures no_price = cost_figures(8, 4000.0, 1000.0, GpuPrice{});
  EXPECT_TRUE(no_price.gpu_hours_per_m_output_tokens.has_value());
  EXPECT_FALSE(no_price.usd_per_m_output_tokens.has_value());
  EXPECT_FALSE(no_price.usd_per_m_input_tokens.has_value());
  const CostFigures idle = cost_figures(8, 0.0, 0.0, GpuPrice{2.0, "flag"});
  EXPECT_DOUBLE_EQ(*idle.output_tokens_per_s_per_gpu, 0);
  EXPECT_FALSE(idle.gpu_hours_per_m_output_tokens.has_value());  // infinite: no figure
  EXPECT_FALSE(idle.usd_per_m_output_tokens.has_value());
  const CostFigures none = cost_figures(8, std::nullopt, std::nullopt, GpuPrice{2.0, "flag"});
  EXPECT_FALSE(none.output_tokens_per_s_per_gpu.has_value());
}

// The flag's price wins over the topology's; without either there is none (no placeholder).
TEST(Planner, PriceFromTheFlagOrTheTopology) {
  Scenario sc;
  TopologySpec spec = testing::nvlink_node_spec("h800-sxm", 8, 160e9);
  sc.topology = std::make_shared<const Topology>(spec);
  EXPECT_FALSE(gpu_price(sc, std::nullopt).usd_per_hour.has_value());
  EXPECT_EQ(gpu_price(sc, std::nullopt).source, "");
  EXPECT_EQ(*gpu_price(sc, 3.5).usd_per_hour, 3.5);
  EXPECT_EQ(gpu_price(sc, 3.5).source, "flag");
  spec.gpu.price_usd_per_hour = 2.25;
  sc.topology = std::make_shared<const Topology>(spec);
  EXPECT_EQ(*gpu_price(sc, std::nullopt).usd_per_hour, 2.25);
  EXPECT_EQ(gpu_price(sc, std::nullopt).source, "topology");
  EXPECT_EQ(*gpu_price(sc, 3.5).usd_per_hour, 3.5);
}

// The frontier of (cost per million output tokens, TTFT p99, TPOT p99), all lower is better,
// checked against the definition by brute force.
TEST(Planner, ParetoFrontier) {
  std::vector<PlanEntry> es = {
      entry(0, 8, 1000, 100, 20),   // cheap, slow TTFT
      entry(1, 8, 500, 50, 20),     // dearer, faster TTFT
      entry(2, 8, 400, 60, 25),     // dominated by 1
      entry(3, 16, 1000, 100, 20),  // dominated by 0 (same latency, twice the cost)
      entry(4, 8, 1000, 100, 20),   // ties 0 on all three: neither dominates
      entry(5, 8, 2000, 500, 50),   // cheapest, slowest
  };
  es.push_back(entry(6, 8, 3000, 10, 5));
  es.back().error = "did not run";
  es.push_back(entry(7, 8, 3000, 10, 5));
  es.back().tpot_p99_ms.reset();  // a figure missing: not a candidate
  mark_pareto(es);
  const std::vector<bool> want = {true, true, false, false, true, true, false, false};
  for (size_t i = 0; i < es.size(); ++i) EXPECT_EQ(es[i].pareto, want[i]) << i;
}

// Cheapest feasible: lowest cost per million output tokens among the feasible ones; ties go to
// fewer GPUs, then grid order; dollars when every candidate has a price, else GPU-hours.
TEST(Planner, CheapestFeasible) {
  std::vector<PlanEntry> es = {entry(0, 8, 2000, 1, 1, false), entry(1, 8, 1000, 1, 1),
                               entry(2, 4, 500, 1, 1), entry(3, 8, 1000, 1, 1)};
  EXPECT_FALSE(cost_axis_is_usd(es));
  EXPECT_EQ(cheapest_feasible(es), std::optional<size_t>(2));  // same cost as 1: fewer GPUs
  es[2].feasible = false;
  EXPECT_EQ(cheapest_feasible(es), std::optional<size_t>(1));  // ties with 3: grid order
  // With prices, the cheaper GPU wins at equal GPU-hours.
  std::vector<PlanEntry> priced = {entry(0, 8, 1000, 1, 1, true, 3.0),
                                   entry(1, 8, 1000, 1, 1, true, 2.0)};
  EXPECT_TRUE(cost_axis_is_usd(priced));
  EXPECT_EQ(cheapest_feasible(priced), std::optional<size_t>(1));
  // One without a price: compared in GPU-hours (a tie, so grid order).
  priced.push_back(entry(2, 8, 1000, 1, 1, true));
  EXPECT_FALSE(cost_axis_is_usd(priced));
  EXPECT_EQ(cheapest_feasible(priced), std::optional<size_t>(0));
  for (auto& e : es) e.feasible = false;
  EXPECT_EQ(cheapest_feasible(es), std::nullopt);
}

Plan small_plan() {
  Plan plan;
  plan.command = "sweep";
  plan.limits = "attainment>=0.99";
  plan.feasible_rule = "every run meets attainment>=0.99";
  plan.parameter_keys = {"deployment.replicas"};
  plan.entries = {entry(0, 2, 1000, 10, 2, true, 2.5), entry(1, 4, 1000, 8, 2, false, 2.5)};
  plan.entries[0].parameter_values = {"1"};
  plan.entries[0].parameters = "deployment.replicas=1";
  plan.entries[0].tpot_p50_ms = 8;
  plan.entries[0].output_tokens_per_s_per_user = tokens_per_s_per_user(8);
  plan.entries[1].parameter_values = {"2"};
  plan.entries[1].infeasible_reason = "seed 1: attainment 0.9 < 0.99";
  plan.entries.push_back(PlanEntry{});
  plan.entries.back().config_idx = 2;
  plan.entries.back().parameter_values = {"3"};
  plan.entries.back().error = "does not fit";
  mark_pareto(plan.entries);
  plan.cheapest = cheapest_feasible(plan.entries);
  plan.cheapest_rule = "lowest cost per million output tokens";
  return plan;
}

TEST(Planner, CsvOfThePlan) {
  std::ostringstream os;
  write_plan_csv(small_plan(), os);
  std::istringstream in(os.str());
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    rows.emplace_back();
    ASSERT_TRUE(split_csv_line(line, rows.back()));
  }
  ASSERT_EQ(rows.size(), 4u);
  const auto& h = rows[0];
  auto at = [&](size_t row, const std::string& col) {
    return rows[row][static_cast<size_t>(std::find(h.begin(), h.end(), col) - h.begin())];
  };
  EXPECT_EQ(h[1], "deployment.replicas");
  EXPECT_EQ(at(1, "output_tokens_per_s_per_gpu"), "500");
  EXPECT_EQ(at(1, "tpot_p50_ms"), "8");
  EXPECT_EQ(at(1, "output_tokens_per_s_per_user"), "125");  // 1000 / 8 ms
  EXPECT_EQ(at(2, "output_tokens_per_s_per_user"), "");
  EXPECT_EQ(at(1, "usd_per_m_output_tokens"), "1.38888888888889");  // 2 x 2.5 / 3.6, 15 digits
  EXPECT_EQ(at(1, "gpu_price_source"), "flag");
  EXPECT_EQ(at(1, "feasible"), "true");
  EXPECT_EQ(at(1, "pareto"), "true");
  EXPECT_EQ(at(1, "cheapest"), "true");
  EXPECT_EQ(at(2, "feasible"), "false");
  EXPECT_EQ(at(2, "pareto"), "true");  // faster TTFT at twice the cost
  EXPECT_EQ(at(2, "infeasible_reason"), "seed 1: attainment 0.9 < 0.99");
  EXPECT_EQ(at(3, "status"), "error");
  EXPECT_EQ(at(3, "num_gpus"), "");
  EXPECT_EQ(at(3, "usd_per_m_output_tokens"), "");
}

TEST(Planner, JsonOfThePlan) {
  std::ostringstream os;
  write_plan_json(small_plan(), os);
  const nlohmann::json j = nlohmann::json::parse(os.str());
  EXPECT_EQ(j["cost_axis"], "usd_per_m_output_tokens");
  EXPECT_EQ(j["pareto_axes"],
            nlohmann::json::array({"usd_per_m_output_tokens", "ttft_p99_ms", "tpot_p99_ms"}));
  EXPECT_EQ(j["feasible"], nlohmann::json::array({0}));
  EXPECT_EQ(j["pareto"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["cheapest_feasible"]["config_idx"], 0);
  EXPECT_EQ(j["cheapest_feasible"]["parameters"]["deployment.replicas"], "1");
  EXPECT_EQ(j["configs"][2]["status"], "error");
  EXPECT_TRUE(j["configs"][2]["usd_per_m_output_tokens"].is_null());
  const std::string text = plan_summary_text(small_plan());
  EXPECT_EQ(j["feasible_rule"], "every run meets attainment>=0.99");
  EXPECT_EQ(j["configs"][0]["output_tokens_per_s_per_user"], 125);
  EXPECT_NE(text.find("feasible (every run meets attainment>=0.99): 1 of 3 configurations (1 did "
                      "not run)"),
            std::string::npos)
      << text;
  // The frontier holds an infeasible configuration too: said beside it, with the count.
  EXPECT_NE(text.find("Pareto frontier of the configurations that ran, feasible or not (cost per "
                      "million output tokens, TTFT p99, TPOT p99): configs 0, 1; 1 of these 2 "
                      "feasible"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cheapest feasible (lowest cost per million output tokens): config 0 "
                      "(deployment.replicas=1), 2 GPUs, 500 output tok/s per GPU, 125 output tok/s "
                      "per user, $1.389 per million output tokens"),
            std::string::npos)
      << text;
}

// Without any price the summary says so; costs are in GPU-hours.
TEST(Planner, SummaryWithoutAPrice) {
  Plan plan;
  plan.limits = "attainment>=0.99";
  plan.entries = {entry(0, 2, 1000, 10, 2)};
  plan.cheapest = cheapest_feasible(plan.entries);
  plan.cheapest_rule = "lowest cost per million output tokens";
  const std::string text = plan_summary_text(plan);
  EXPECT_NE(text.find("0.5556 GPU-hours per million output tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("cost: no GPU price (give --gpu-price-per-hour USD or [gpu] "
                      "price_usd_per_hour in the topology)"),
            std::string::npos)
      << text;
}

TEST(Planner, TokensPerSecondPerUser) {
  EXPECT_EQ(tokens_per_s_per_user(20.0), 50.0);
  EXPECT_EQ(tokens_per_s_per_user(std::nullopt), std::nullopt);
  EXPECT_EQ(tokens_per_s_per_user(0.0), std::nullopt);
}

TEST(Planner, PlanFileNames) {
  check_plan_path("plan.csv", "--plan");
  check_plan_path("dir/plan.json", "--plan");
  EXPECT_NE(testing::config_error_of([] {
              check_plan_path("plan.txt", "--plan");
            }).find("must end in .csv or .json"),
            std::string::npos);
}

}  // namespace
}  // namespace moesim::sim::study
