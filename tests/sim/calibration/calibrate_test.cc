// calibrate(): engine records to fits. Here the parts the other tests do not reach: lm_head's fit
// on weight bytes, and measured all-to-alls feeding the network fit only with a topology.
#include "sim/calibration/calibrate.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

OpSample record(const std::string& op, int64_t tokens, double flops, double weight_bytes,
                double activation_bytes, int64_t ns) {
  OpSample s;
  s.op = op;
  s.dtype = "bf16";
  s.tokens = tokens;
  s.flops = flops;
  s.weight_bytes = weight_bytes;
  s.activation_bytes = activation_bytes;
  s.bytes = weight_bytes + activation_bytes;
  s.measured = true;
  s.measured_ns = ns;
  s.min_ns = s.max_ns = ns;
  return s;
}

TEST(Calibrate, LmHeadIsFittedOnItsWeightBytes) {
  MeasurementSet m;
  m.file = "dir/meas.jsonl";
  m.backend = "cpu";
  m.device = "test cpu";
  // H = 256, V = 1024: time = 10 us + 1 ns per 1000 FLOPs.
  for (int64_t rows = 1; rows <= 20; ++rows) {
    const double flops = 2.0 * rows * 256 * 1024;
    m.ops.push_back(record("lm_head", rows, flops, 256.0 * 1024 * 2, rows * (512.0 + 8),
                           static_cast<int64_t>(1e4 + flops / 1e3)));
  }
  const CalibrateReport rep = calibrate({m}, CalibrateOptions{});
  const OpFit* fit = rep.profile.find("lm_head", "bf16");
  ASSERT_NE(fit, nullptr);
  EXPECT_EQ(fit->engine_ops, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(rep.profile.measurement_files, std::vector<std::string>{"meas.jsonl"});
  // The range holds the weights only: a simulator query (weights, no activations) is inside it.
  EXPECT_EQ(fit->range.bytes_min, 256.0 * 1024 * 2);
  EXPECT_EQ(fit->range.bytes_max, 256.0 * 1024 * 2);
  EXPECT_TRUE(fit->in_range(2.0 * 5 * 256 * 1024, 256.0 * 1024 * 2, 5));
  EXPECT_NEAR(fit->predict_s(2.0 * 5 * 256 * 1024, 256.0 * 1024 * 2, 5),
              1e-5 + 2.0 * 5 * 256 * 1024 * 1e-12, 1e-8);
  EXPECT_EQ(fit_bytes_of(m.ops[0]), 256.0 * 1024 * 2);
  EXPECT_EQ(cost_kind_of_engine_op("lm_head"), "lm_head");
}

TEST(Calibrate, ModelsOfVeryDifferentSizesGetOneFitEach) {
  // A small and a large "model" of the same op kind, at different efficiencies: 12 records each,
  // 1-2 kB and 1-2 MB of weights, 1 ns per 100 FLOPs on the small one, per 400 on the large.
  MeasurementSet m;
  m.file = "meas.jsonl";
  for (int i = 0; i < 12; ++i) {
    const double small_flops = 1e4 * (i + 1), large_flops = 1e7 * (i + 1);
    m.ops.push_back(record("dense_ffn", i + 1, small_flops, 1000.0 + 50 * i, 0,
                           static_cast<int64_t>(1000 + small_flops / 100)));
    m.ops.push_back(record("dense_ffn", i + 1, large_flops, 1e6 + 5e4 * i, 0,
                           static_cast<int64_t>(1000 + large_flops / 400)));
  }
  const CalibrateReport rep = calibrate({m}, CalibrateOptions{});
  ASSERT_EQ(rep.profile.ops.size(), 2u);
  const OpFit& small = rep.profile.ops[0];
  const OpFit& large = rep.profile.ops[1];
  EXPECT_EQ(small.range.bytes_max, 1550.0);
  EXPECT_EQ(large.range.bytes_min, 1e6);
  EXPECT_LT(small.quality.mape, 1e-6);
  EXPECT_LT(large.quality.mape, 1e-6);
  // Lookup by bytes: inside a range, that fit; outside every range, the nearest.
  EXPECT_EQ(rep.profile.find("dense_ffn", "bf16", 1200.0), &small);
  EXPECT_EQ(rep.profile.find("dense_ffn", "bf16", 1.2e6), &large);
  EXPECT_EQ(rep.profile.find("dense_ffn", "bf16", 1e4), &small);
  EXPECT_EQ(rep.profile.find("dense_ffn", "bf16", 1e7), &large);
  EXPECT_EQ(rep.profile.find("dense_ffn", "bf16"), &small);
  // Both survive the profile file; overlapping ranges of one kind are rejected.
  std::ostringstream os;
  write_profile(os, rep.profile);
  const CalibrationProfile q = parse_profile(os.str(), "p.toml");
  ASSERT_EQ(q.ops.size(), 2u);
  EXPECT_EQ(q.find("dense_ffn", "bf16", 1.2e6)->range.bytes_min, 1e6);
  CalibrationProfile bad = rep.profile;
  bad.ops[1].range.bytes_min = 1500;
  std::ostringstream bad_os;
  write_profile(bad_os, bad);
  EXPECT_THROW(parse_profile(bad_os.str(), "bad.toml"), ConfigError);
  // With the split disabled, one fit.
  CalibrateOptions one;
  one.min_size_gap = 0;
  EXPECT_EQ(calibrate({m}, one).profile.ops.size(), 1u);
}

TEST(Calibrate, MeasuredAllToAllsNeedATopologyForTheNetworkFit) {
  MeasurementSet m;
  m.file = "meas.jsonl";
  m.backend = "cuda";
  for (int i = 1; i <= 8; ++i)
    m.collectives.push_back({"meas.jsonl", 8, 1e6 * i, 1e-5 * i, "", false});
  const CalibrateReport rep = calibrate({m}, CalibrateOptions{});
  EXPECT_EQ(rep.num_collective_samples, 8);
  EXPECT_TRUE(rep.profile.network.empty());
  ASSERT_FALSE(rep.skipped.empty());
  EXPECT_NE(rep.skipped.back().find("no topology"), std::string::npos);
}

TEST(Calibrate, RecordsTheEngineFlaggedNoisyAreLeftOutWhileEnoughCleanOnesRemain) {
  // rmsnorm: 12 clean records at 1 ns per byte and 3 flagged ones at 3x; router: 4 clean and 3
  // flagged, too few clean (min_samples 6) to fit without them.
  MeasurementSet m;
  m.file = "meas.jsonl";
  for (int64_t i = 1; i <= 15; ++i) {
    const double bytes = 1000.0 * i;
    OpSample s = record("rmsnorm", i, 0, 0, bytes, static_cast<int64_t>(bytes));
    if (i % 5 == 0) {
      s.noisy = true;
      s.measured_ns *= 3;
    }
    m.ops.push_back(s);
  }
  for (int64_t i = 1; i <= 7; ++i) {
    OpSample s = record("router", i, 1e6 * i, 1000, 100.0 * i, 1000 * i);
    s.noisy = i > 4;
    m.ops.push_back(s);
  }
  const CalibrateReport rep = calibrate({m}, CalibrateOptions{});
  EXPECT_EQ(rep.num_flagged_noisy, 3);
  EXPECT_EQ(rep.num_noisy_kept, 3);
  EXPECT_EQ(rep.num_used, 12 + 7);
  const OpFit* norm = rep.profile.find("rmsnorm", "bf16");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->quality.num_samples, 12);
  EXPECT_NEAR(norm->predict_s(0, 7000, 7), 7e-6, 1e-9);  // the flagged 3x records moved nothing
  const OpFit* router = rep.profile.find("router", "bf16");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->quality.num_samples, 7);
  bool noted = false;
  for (const std::string& s : rep.skipped) {
    noted = noted || s == "router/bf16: 3 records flagged noisy kept (only 4 clean)";
  }
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace moesim::sim
