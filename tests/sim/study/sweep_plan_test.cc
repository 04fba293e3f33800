#include "sim/study/sweep_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "sim/study/csv.h"
#include "sim/study/sweep.h"
#include "tests/support/config_errors.h"

namespace moesim::sim::study {
namespace {

const std::string kGrid = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/grid.toml";

std::string sweep_csv(const SweepPlanner& planner, Shard shard = {}) {
  const SweepSpec spec = load_sweep(kGrid);
  ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  std::ostringstream os;
  SweepOptions opt;
  opt.num_threads = 2;
  opt.shard = shard;
  opt.planner = planner;
  run_sweep(spec, t, opt, os);
  return os.str();
}

std::vector<std::vector<std::string>> rows_of(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    rows.emplace_back();
    EXPECT_TRUE(split_csv_line(line, rows.back()));
  }
  return rows;
}

// One entry per configuration: means over its seeds, attainment pooled over them, the cost from
// the mean throughput, feasible when every seed's run is.
TEST(SweepPlan, AggregatesTheSeedsOfEachConfiguration) {
  SweepPlanner planner;
  planner.gpu_price_per_hour = 2.0;
  const std::string csv = sweep_csv(planner);
  std::istringstream in(csv);
  const Plan plan = plan_from_sweep_csv(in, "sweep.csv");
  EXPECT_EQ(plan.command, "sweep");
  EXPECT_EQ(plan.limits, "attainment>=0.99");
  EXPECT_EQ(plan.feasible_rule, "every run meets attainment>=0.99");
  EXPECT_EQ(plan.parameter_keys,
            (std::vector<std::string>{"scheduler.max_seqs", "deployment.replicas"}));
  ASSERT_EQ(plan.entries.size(), 4u);
  const auto rows = rows_of(csv);
  const auto& h = rows[0];
  auto col = [&](const char* c) {
    return static_cast<size_t>(std::find(h.begin(), h.end(), c) - h.begin());
  };
  for (const PlanEntry& e : plan.entries) {
    double out = 0, ttft = 0, tpot50 = 0;
    std::vector<double> outs;
    int64_t met = 0, decided = 0;
    bool feasible = true;
    for (size_t r = 1; r < rows.size(); ++r) {
      if (std::stoll(rows[r][col("config_idx")]) != e.config_idx) continue;
      outs.push_back(std::stod(rows[r][col("output_tokens_per_s")]));
      out += std::stod(rows[r][col("output_tokens_per_s")]) / 2;
      ttft += std::stod(rows[r][col("ttft_p99_ms")]) / 2;
      tpot50 += std::stod(rows[r][col("tpot_p50_ms")]) / 2;
      met += std::stoll(rows[r][col("num_slo_met")]);
      decided += std::stoll(rows[r][col("num_slo_decided")]);
      feasible = feasible && rows[r][col("feasible")] == "true";
    }
    EXPECT_EQ(e.num_runs, 2);
    EXPECT_DOUBLE_EQ(*e.output_tokens_per_s, out);
    // Two seeds: t(0.975, 1) = 12.7062 x sd / sqrt(2), sd = |a - b| / sqrt(2).
    ASSERT_EQ(outs.size(), 2u);
    EXPECT_NEAR(*e.output_tokens_per_s_half_width, 12.706205 * std::fabs(outs[0] - outs[1]) / 2,
                1e-6 * (1 + std::fabs(outs[0] - outs[1])));
    EXPECT_TRUE(e.ttft_p99_ms_half_width.has_value());
    EXPECT_DOUBLE_EQ(*e.ttft_p99_ms, ttft);
    EXPECT_DOUBLE_EQ(*e.tpot_p50_ms, tpot50);  // interactivity of the mean TPOT p50
    EXPECT_DOUBLE_EQ(*e.output_tokens_per_s_per_user, 1000.0 / tpot50);
    EXPECT_DOUBLE_EQ(*e.slo_attainment, static_cast<double>(met) / static_cast<double>(decided));
    EXPECT_EQ(e.feasible, feasible);
    EXPECT_EQ(e.price.source, "flag");
    EXPECT_DOUBLE_EQ(*e.cost.usd_per_m_output_tokens,
                     2.0 * static_cast<double>(e.num_gpus) * 1e6 / (out * 3600));
    EXPECT_EQ(e.parameters, "scheduler.max_seqs=" + e.parameter_values[0] +
                                ", deployment.replicas=" + e.parameter_values[1]);
  }
  ASSERT_TRUE(plan.cheapest.has_value());
  EXPECT_TRUE(plan.entries[*plan.cheapest].feasible);
}

// A configuration whose seeds' runs are not all ok or feasible is not feasible, with the first
// seed that is not named; one without an ok run keeps its error.
TEST(SweepPlan, InfeasibleAndErrorRows) {
  SweepPlanner tight;
  tight.limits.percentile_limits = {{"ttft_p50_ms", 1e-3}};
  std::istringstream in(sweep_csv(tight));
  const Plan plan = plan_from_sweep_csv(in, "sweep.csv");
  for (const PlanEntry& e : plan.entries) {
    EXPECT_FALSE(e.feasible);
    EXPECT_EQ(e.infeasible_reason.rfind("seed 1: ttft_p50_ms ", 0), 0u) << e.infeasible_reason;
  }
  EXPECT_FALSE(plan.cheapest.has_value());
  const std::string text = plan_summary_text(plan);
  EXPECT_NE(text.find("cheapest feasible: none"), std::string::npos) << text;

  // Rows of a configuration that did not run.
  const std::string csv = sweep_csv(SweepPlanner{});
  const auto rows = rows_of(csv);
  std::vector<std::string> broken = rows[1], broken2 = rows[2];
  const auto& h = rows[0];
  auto col = [&](const char* c) {
    return static_cast<size_t>(std::find(h.begin(), h.end(), c) - h.begin());
  };
  for (auto* r : {&broken, &broken2}) {
    for (size_t c = col("status"); c < r->size(); ++c) (*r)[c] = "";
    (*r)[col("status")] = "error";
    (*r)[col("error")] = "does not fit";
  }
  std::string edited = csv_line(h) + "\n" + csv_line(broken) + "\n" + csv_line(broken2) + "\n";
  for (size_t r = 3; r < rows.size(); ++r) edited += csv_line(rows[r]) + "\n";
  std::istringstream in2(edited);
  const Plan p2 = plan_from_sweep_csv(in2, "sweep.csv");
  EXPECT_EQ(p2.entries[0].error, "error: does not fit");
  EXPECT_FALSE(p2.entries[0].feasible);
  EXPECT_FALSE(p2.entries[0].pareto);
}

// Shards merged in any order give the same table as the whole sweep.
TEST(SweepPlan, RowOrderDoesNotMatter) {
  const std::string whole = sweep_csv(SweepPlanner{});
  const auto rows = rows_of(whole);
  std::string reversed = csv_line(rows[0]) + "\n";
  for (size_t r = rows.size() - 1; r >= 1; --r) reversed += csv_line(rows[r]) + "\n";
  std::istringstream a(whole), b(reversed);
  std::ostringstream ja, jb;
  write_plan_json(plan_from_sweep_csv(a, "a"), ja);
  write_plan_json(plan_from_sweep_csv(b, "b"), jb);
  EXPECT_EQ(ja.str(), jb.str());
}

TEST(SweepPlan, RefusesOtherCsvs) {
  std::istringstream not_sweep("a,b\n1,2\n");
  EXPECT_NE(testing::config_error_of([&] {
              plan_from_sweep_csv(not_sweep, "x.csv");
            }).find("x.csv:1: not a sweep CSV"),
            std::string::npos);
  std::istringstream old_sweep("run_idx,num_runs,config_idx,seed,status\n0,1,0,1,ok\n");
  EXPECT_NE(testing::config_error_of([&] {
              plan_from_sweep_csv(old_sweep, "old.csv");
            }).find("no column 'num_gpus'"),
            std::string::npos);
  // Rows written with different limits (two sweeps concatenated).
  const std::string a = sweep_csv(SweepPlanner{});
  SweepPlanner other;
  other.limits.min_attainment = 0.5;
  const std::string b = sweep_csv(other);
  std::istringstream mixed(a + b.substr(b.find('\n') + 1));
  EXPECT_NE(testing::config_error_of([&] { plan_from_sweep_csv(mixed, "m.csv"); })
                .find("feasible_limits: 'attainment>=0.5' where earlier rows have "
                      "'attainment>=0.99'"),
            std::string::npos);
}

}  // namespace
}  // namespace moesim::sim::study
