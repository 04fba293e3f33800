#include "sim/cost/profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "sim/config/config_error.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

TEST(Profile, RoundTrips) {
  CalibrationProfile p;
  p.name = "cpu-test";
  p.backend = "cpu";
  p.device = "test cpu";
  p.measurement_files = {"a.jsonl", "b.jsonl"};
  OpFit f;
  f.kind = "expert_ffn";
  f.dtype = "bf16";
  f.engine_ops = {"expert_ffn"};
  f.features = {FitFeature::kFlops, FitFeature::kBytes};
  f.segments = {FitSegment{64, 1.5e-6, 2.5e-12, 3.5e-10, 0},
                FitSegment{std::numeric_limits<double>::infinity(), 0, 3e-12, 1e-10, 0}};
  f.range = FitRange{1e3, 1e9, 2e3, 2e8, 1, 512};
  f.quality.num_samples = 100;
  f.quality.r2 = 0.987654321;
  f.quality.mape = 0.0312;
  p.ops.push_back(f);
  CollectiveFit c;
  c.op = "dispatch_a2a";
  c.link_class = "local";
  c.latency_s = 12e-6;
  c.bytes_per_s = 3.2e11;
  c.range.bytes_min = 1e3;
  c.range.bytes_max = 1e8;
  p.collectives.push_back(c);

  std::ostringstream os;
  write_profile(os, p);
  CalibrationProfile q = parse_profile(os.str(), "round-trip.toml");
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.measurement_files, p.measurement_files);
  ASSERT_EQ(q.ops.size(), 1u);
  const OpFit* g = q.find("expert_ffn", "bf16");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->features, f.features);
  ASSERT_EQ(g->segments.size(), 2u);
  EXPECT_DOUBLE_EQ(g->segments[0].s_per_flop, 2.5e-12);
  EXPECT_TRUE(std::isinf(g->segments[1].tokens_max));
  EXPECT_DOUBLE_EQ(g->range.tokens_max, 512);
  EXPECT_DOUBLE_EQ(g->quality.r2, 0.987654321);
  EXPECT_DOUBLE_EQ(g->predict_s(1e6, 1e4, 10), f.predict_s(1e6, 1e4, 10));
  ASSERT_EQ(q.collectives.size(), 1u);
  EXPECT_DOUBLE_EQ(q.collectives[0].bytes_per_s, 3.2e11);
}

TEST(Profile, WrongSchemaIsAConfigError) {
  EXPECT_THROW(parse_profile("schema = \"other\"\n", "bad.toml"), ConfigError);
}

TEST(Profile, UnknownKeyIsAConfigError) {
  EXPECT_THROW(parse_profile("schema = \"moesim.profile.v1\"\nbogus = 1\n", "bad.toml"),
               ConfigError);
}

// The bad-profile corpus (tests/data/bad/profiles/): every file fails with its exact message
// (after "<path>:"), and every file is listed. Coefficients outside their documented domains
// (issue 19) would make every op take centuries.
TEST(Profile, BadCorpusGivesExactMessages) {
  const std::string dir = std::string(MOESIM_SOURCE_DIR) + "/tests/data/bad/profiles/";
  const std::map<std::string, std::string> expected = {
      {"s_per_flop_absurd.toml",
       "27:18: op[0].segment[0].s_per_flop: must be at most 1 (a device of 1 FLOP/s)"},
      {"intercept_absurd.toml", "25:19: op[0].segment[0].intercept_s: must be at most 1000 s"},
      {"collective_below_one_byte_per_s.toml",
       "9:15: collective[0].bytes_per_s: must be at least 1 (1 byte/s)"},
  };
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    on_disk.insert(entry.path().filename().string());
  }
  EXPECT_EQ(on_disk.size(), expected.size()) << "every bad file needs an expected message";
  for (const auto& [file, message] : expected) {
    const std::string path = dir + file;
    EXPECT_EQ(testing::config_error_of([&] { load_profile(path); }, "(loaded)"),
              path + ":" + message);
  }
}

}  // namespace
}  // namespace moesim::sim
