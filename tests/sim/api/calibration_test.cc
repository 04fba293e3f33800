#include "sim/api/calibration.h"

#include <gtest/gtest.h>

#include <sstream>

#include "sim/api/usage_error.h"
#include "tests/sim/api/usage_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::api {
namespace {

const std::string kSource = MOESIM_SOURCE_DIR;

template <typename F>
std::string usage_error(F fn) {
  return testing::usage_error_of(fn);
}

TEST(ApiDeriveProfile, CarriesTheEfficienciesToAnotherGpu) {
  DeriveProfileRequest r;
  r.from_path = kSource + "/profiles/h800-public.toml";
  r.source_topology_path = kSource + "/topologies/h800-128x8.toml";
  r.topology_path = kSource + "/topologies/h200-node.toml";
  r.out_path = scratch::path("h200.toml");
  const DerivedProfile d = derive_profile(r);
  EXPECT_EQ(d.profile.name, "h800-public-derived-h200-sxm");
  EXPECT_EQ(d.profile.backend, "derived");
  EXPECT_EQ(load_profile(*r.out_path).derived_from, "h800-public.toml");
  std::ostringstream text;
  write_derive_profile_text(text, d);
  EXPECT_EQ(text.str(), "moesim derive-profile: h800-public-derived-h200-sxm\n  " + d.derivation +
                            "\n  wrote " + *r.out_path + "\n");
  r.source_topology_path = r.topology_path;
  EXPECT_NE(usage_error([&] { derive_profile(r); }).find("--source-topology: its GPU is h200-sxm"),
            std::string::npos);
}

TEST(ApiCalibrate, ChecksTheRequestAndRefusesAnEmptyFit) {
  CalibrateRequest r;
  EXPECT_EQ(usage_error([&] { calibrate(r); }), "missing argument: MEAS.jsonl");
  r.measurement_paths = {kSource + "/tests/data/calibration/meas_small.jsonl"};
  EXPECT_EQ(usage_error([&] { calibrate(r); }), "missing --out PROFILE.toml");
  r.nccl_tests = {"a.txt"};
  EXPECT_EQ(usage_error([&] { calibrate(r); }), "--nccl-tests needs --topology");
  r.nccl_tests.clear();
  r.out_path = scratch::path("never.toml");
  EXPECT_EQ(usage_error([&] { calibrate(r); }),
            "no op kind (and no link class) had enough measured records to fit");
}

TEST(ApiValidate, NeedsAProfileAndMeasurements) {
  ValidateRequest r;
  r.scenario_path = kSource + "/scenarios/quickstart.toml";
  EXPECT_EQ(usage_error([&] { validate(r); }), "missing --profile PROFILE.toml");
  r.profile_path = "p.toml";
  EXPECT_EQ(usage_error([&] { validate(r); }), "missing --measurements MEAS.jsonl");
}

}  // namespace
}  // namespace moesim::sim::api
