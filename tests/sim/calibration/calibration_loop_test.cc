// The calibration loop on a small case, end to end through the programs (scripts/calibrate_cpu.sh):
// record two tiny-model workloads, replay them on the CPU engine, fit a profile on workload A
// (chat) and validate it on the held-out workload B (burst). B's steps are new but lie inside
// the ranges A's fit saw (the scenarios are designed so: out-of-sample, not extrapolation), which
// is checked; the per-step (per GPU) compute error and the composed step duration error out of
// sample must stay below 15% (the targets are 5% per op and per step; docs/calibration.md reports
// the measured numbers).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

int run(const std::string& cmd) {
  std::cout << "+ " << cmd << std::endl;
  return std::system(cmd.c_str());
}

TEST(CalibrationLoop, OutOfSampleStepErrorBelow15Percent) {
  const fs::path bin(MOESIM_BINARY_DIR);
  const std::string moesim = (bin / "apps" / "moesim").string();
  const std::string engine = (bin / "engine" / "moesim-engine").string();
  if (!fs::exists(moesim) || !fs::exists(engine)) {
    GTEST_SKIP() << "needs the moesim and moesim-engine binaries (build targets moesim, "
                    "moesim-engine)";
  }
  const fs::path dir = bin / "calibration_loop_test";
  fs::remove_all(dir);
  // The shipped loop (scripts/calibrate_cpu.sh) on a smaller case, writing only under `dir`.
  // The DeepSeek-V3 slice (minutes of replay) is left out: SLICE_STEPS=0.
  ASSERT_EQ(run("STEPS=24 REPEATS=5 SLICE_STEPS=0 MACHINE=test PROFILE_DIR=" +
                (dir / "profiles").string() + " scripts/calibrate_cpu.sh " + bin.string() + " " +
                dir.string() + " > " + (dir.parent_path() / "calibration_loop_test.log").string() +
                " 2>&1"),
            0);
  std::ifstream f(dir / "xval-chat-to-burst" / "report.json");
  ASSERT_TRUE(f.good());
  nlohmann::json report = nlohmann::json::parse(f);
  const double step_mape = report["per_step_compute"]["mape"].get<double>();
  const double duration_mape = report["step_duration"]["mape"].get<double>();
  std::cout << "out-of-sample per-step compute MAPE " << 100 * step_mape
            << "%, composed step duration MAPE " << 100 * duration_mape << "%" << std::endl;
  for (const auto& [op, s] : report["per_op"].items()) {
    std::cout << "  op " << op << " MAPE " << 100 * s["mape"].get<double>() << "%" << std::endl;
  }
  std::cout << "held-out op records outside the fitted ranges "
            << report["num_ops_out_of_range"].get<int64_t>()
            << ", out-of-range cost queries in the re-simulation "
            << report["num_out_of_range_queries"].get<int64_t>() << " (lm_head by proxy "
            << report["num_proxy_queries"].get<int64_t>() << ")" << std::endl;
  EXPECT_GT(report["per_step_compute"]["num_samples"].get<int64_t>(), 0);
  EXPECT_EQ(report["num_ops_out_of_range"].get<int64_t>(), 0)
      << "the held-out workload left the fitted ranges: extrapolation, not out-of-sample "
         "validation (scenarios/calibration/)";
  EXPECT_LT(step_mape, 0.15);
  EXPECT_LT(duration_mape, 0.15);
}

}  // namespace
