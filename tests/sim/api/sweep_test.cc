#include "sim/api/sweep.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim/api/usage_error.h"
#include "sim/config/config_error.h"
#include "tests/sim/api/usage_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::api {
namespace {

const std::string kGrid = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study/grid.toml";

std::string usage_error(const SweepRequest& r) {
  return testing::usage_error_of([&] { sweep(r); });
}

TEST(ApiSweep, WritesTheCsvAndThePlannersTable) {
  std::ostringstream csv;
  SweepRequest r;
  r.sweep_path = kGrid;
  r.csv = &csv;
  r.threads = 2;
  r.gpu_price_per_hour = 2.5;
  r.plan_path = scratch::path("plan.json");
  const SweepReport report = sweep(r);
  EXPECT_EQ(report.stats.num_runs, 8);
  EXPECT_EQ(report.num_sweep_runs, 8);
  ASSERT_TRUE(report.plan.has_value());
  EXPECT_EQ(report.plan->entries.size(), 4u);
  EXPECT_TRUE(std::ifstream(*r.plan_path).good());
  // The table read back from the CSV is the one `sweep plan` makes of it.
  const std::string path = scratch::write("sweep.csv", csv.str());
  const study::Plan again = sweep_plan(path, std::nullopt);
  std::ostringstream a, b;
  write_sweep_plan_summary(a, *report.plan, std::nullopt);
  write_sweep_plan_summary(b, again, std::nullopt);
  EXPECT_EQ(a.str(), b.str());
  std::ostringstream summary;
  write_sweep_summary(summary, report);
  EXPECT_EQ(
      summary.str().rfind("sweep: 8 runs (shard 1/1 of 8), 0 errors, 0 broken\nsweep plan:\n", 0),
      0u)
      << summary.str();
}

TEST(ApiSweep, AShardHasNoPlan) {
  std::ostringstream csv;
  SweepRequest r;
  r.sweep_path = kGrid;
  r.csv = &csv;
  r.threads = 2;
  r.shard = "2/2";
  const SweepReport report = sweep(r);
  EXPECT_EQ(report.stats.num_runs, 4);
  EXPECT_FALSE(report.plan.has_value());
  std::ostringstream summary;
  write_sweep_summary(summary, report);
  EXPECT_NE(summary.str().find("a shard holds part of the grid"), std::string::npos);
}

TEST(ApiSweep, ChecksTheRequest) {
  SweepRequest r;
  r.sweep_path = kGrid;
  r.resume = true;
  EXPECT_EQ(usage_error(r), "--resume needs --out FILE.csv");
  r = SweepRequest{};
  r.sweep_path = kGrid;
  r.gpu_price_per_hour = 0;
  EXPECT_EQ(usage_error(r), "--gpu-price-per-hour must be > 0 (US dollars per GPU-hour)");
  r = SweepRequest{};
  r.sweep_path = kGrid;
  r.shard = "1/2";
  r.plan_path = scratch::path("plan.csv");
  EXPECT_EQ(usage_error(r),
            "--plan needs the whole sweep: run moesim sweep plan on the merged CSV");
  r = SweepRequest{};
  r.sweep_path = kGrid;
  r.slo = "ttft_ms=100";
  EXPECT_THROW(sweep(r), ConfigError);
}

}  // namespace
}  // namespace moesim::sim::api
