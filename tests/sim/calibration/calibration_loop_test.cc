// The calibration loop on recorded measurements: tests/data/calibration/loop/ holds one recording
// of scripts/calibrate_cpu.sh (STEPS=24 REPEATS=11 SLICE_STEPS=0: the tiny model's chat and burst
// workloads replayed on the CPU engine, step traces and measurements, gzip'd) and the profile
// `moesim calibrate` fitted from chat. The tests fit chat again and check the fit against that
// profile coefficient by coefficient; validate it on the held-out burst measurements, where the
// per-step compute and composed step-duration errors must be the recording's figures, about those
// of a fit that saw burst (out of sample, not extrapolation: no held-out op outside the fitted
// ranges); and show that a profile 30% slow is far off on the same files. Everything is computed
// from files, so the result is the same on every machine and under any load; a change of the fit,
// the cost model or the re-simulation shows as a changed figure. Timing the loop live is
// bench/calibration_loop_bench (docs/calibration.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/api/calibration.h"
#include "sim/cost/profile.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim {
namespace {

const std::string kData = std::string(MOESIM_SOURCE_DIR) + "/tests/data/calibration/loop/";
const std::string kBurst =
    std::string(MOESIM_SOURCE_DIR) + "/scenarios/calibration/tiny-cpu-burst.toml";

// The recording's out-of-sample figures (fit on chat, validate on burst): report.json's
// per_step_compute.mape and step_duration.mape of `moesim validate` on the files.
constexpr double kOutOfSamplePerStepMape = 0.13777677006502936;
constexpr double kOutOfSampleStepDurationMape = 0.18048758730758127;
// How much worse than the in-sample error (a fit on chat and burst, validated on burst) the
// out-of-sample error may be: the fit generalises to steps it did not see.
constexpr double kOutOfSampleMargin = 0.03;

// tests/data/calibration/loop/NAME.gz unpacked into the test's scratch directory; its path.
std::string unpacked(const std::string& name) {
  const std::string out = scratch::path(name);
  const std::string cmd = "gzip -dc '" + kData + name + ".gz' > '" + out + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

// The profile fitted from the recorded measurements `names`, named `out` and written to the
// scratch file `out`.toml.
CalibrationProfile fit(const std::vector<std::string>& names, const std::string& out) {
  api::CalibrateRequest r;
  for (const std::string& name : names) r.measurement_paths.push_back(unpacked(name));
  r.out_path = scratch::path(out + ".toml");
  r.name = out;
  api::calibrate(r);
  return load_profile(*r.out_path);
}

CalibrationProfile fit_chat() { return fit({"chat.meas.jsonl"}, "fit-chat"); }

// `moesim validate` of the burst measurements with `profile_path`.
ValidationReport validate_burst(const std::string& profile_path) {
  api::ValidateRequest r;
  r.scenario_path = kBurst;
  r.profile_path = profile_path;
  r.measurements_path = unpacked("burst.meas.jsonl");
  r.trace_path = unpacked("burst.steps.jsonl");
  return api::validate(r);
}

// a and b equal to 1e-9 relative (the fits are least squares in double: a compiler or CPU may
// change the last bits, nothing more).
void expect_close(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, 1e-9 * std::max(std::abs(a), std::abs(b)) + 1e-300) << what;
}

TEST(CalibrationFromRecording, FitIsTheCommittedProfile) {
  const CalibrationProfile got = fit_chat();
  const CalibrationProfile want = load_profile(kData + "fit-chat.toml");
  ASSERT_EQ(got.ops.size(), want.ops.size())
      << "the fit of the recorded chat measurements has other op kinds than "
         "tests/data/calibration/loop/fit-chat.toml (README.md there: how to refit it)";
  for (size_t i = 0; i < want.ops.size(); ++i) {
    const OpFit& g = got.ops[i];
    const OpFit& w = want.ops[i];
    const std::string op = w.kind + "/" + w.dtype;
    EXPECT_EQ(g.kind, w.kind);
    EXPECT_EQ(g.dtype, w.dtype);
    EXPECT_EQ(g.engine_ops, w.engine_ops) << op;
    EXPECT_EQ(g.features, w.features) << op;
    ASSERT_EQ(g.segments.size(), w.segments.size()) << op << ": regimes";
    for (size_t s = 0; s < w.segments.size(); ++s) {
      const std::string seg = op + " segment " + std::to_string(s) + ": ";
      expect_close(g.segments[s].intercept_s, w.segments[s].intercept_s, seg + "intercept_s");
      expect_close(g.segments[s].s_per_flop, w.segments[s].s_per_flop, seg + "s_per_flop");
      expect_close(g.segments[s].s_per_byte, w.segments[s].s_per_byte, seg + "s_per_byte");
      expect_close(g.segments[s].s_per_token, w.segments[s].s_per_token, seg + "s_per_token");
      if (std::isfinite(w.segments[s].tokens_max)) {
        EXPECT_EQ(g.segments[s].tokens_max, w.segments[s].tokens_max) << seg + "tokens_max";
      }
    }
    EXPECT_EQ(g.quality.num_samples, w.quality.num_samples) << op;
    expect_close(g.quality.mape, w.quality.mape, op + ": fit MAPE");
    EXPECT_EQ(g.range.flops_min, w.range.flops_min) << op;
    EXPECT_EQ(g.range.flops_max, w.range.flops_max) << op;
    EXPECT_EQ(g.range.bytes_max, w.range.bytes_max) << op;
    EXPECT_EQ(g.range.tokens_max, w.range.tokens_max) << op;
  }
}

TEST(CalibrationFromRecording, OutOfSampleErrorIsTheRecordingsAndAboutTheInSampleError) {
  fit_chat();
  const ValidationReport v = validate_burst(scratch::path("fit-chat.toml"));
  EXPECT_GT(v.per_step.num_samples, 0);
  EXPECT_GT(v.step_duration.num_samples, 0);
  EXPECT_EQ(v.num_ops_without_fit, 0);
  EXPECT_EQ(v.num_ops_out_of_range, 0)
      << "the held-out workload left the fitted ranges: extrapolation, not out-of-sample "
         "validation (scenarios/calibration/)";
  EXPECT_EQ(v.num_out_of_range_queries, 0);
  EXPECT_GT(v.num_moe_layers_checked, 0);
  EXPECT_EQ(v.num_routing_mismatches, 0) << "the re-simulation did not reproduce the routing";
  expect_close(v.per_step.mape, kOutOfSamplePerStepMape, "out-of-sample per-step compute MAPE");
  expect_close(v.step_duration.mape, kOutOfSampleStepDurationMape,
               "out-of-sample step duration MAPE");

  fit({"chat.meas.jsonl", "burst.meas.jsonl"}, "fit-both");
  const ValidationReport in_sample = validate_burst(scratch::path("fit-both.toml"));
  EXPECT_LT(v.per_step.mape, in_sample.per_step.mape + kOutOfSampleMargin);
  EXPECT_LT(v.step_duration.mape, in_sample.step_duration.mape + kOutOfSampleMargin);
}

// The validation can tell a wrong profile: the same fit with every coefficient 30% high is far
// off on the same files.
TEST(CalibrationFromRecording, AProfileThirtyPercentSlowIsFarOff) {
  const CalibrationProfile fitted = fit_chat();
  const ValidationReport base = validate_burst(scratch::path("fit-chat.toml"));
  CalibrationProfile slow = fitted;
  for (OpFit& op : slow.ops) {
    for (FitSegment& s : op.segments) {
      s.intercept_s *= 1.3;
      s.s_per_flop *= 1.3;
      s.s_per_byte *= 1.3;
      s.s_per_token *= 1.3;
    }
  }
  const std::string path = scratch::path("slow.toml");
  {
    std::ofstream os(path);
    write_profile(os, slow);
  }
  const ValidationReport v = validate_burst(path);
  EXPECT_GT(v.per_step.mape, base.per_step.mape + 0.1);
  EXPECT_GT(v.per_step.mean_rel_error, base.per_step.mean_rel_error + 0.25)
      << "a profile 30% slow simulates steps about 30% slow";
}

}  // namespace
}  // namespace moesim::sim
