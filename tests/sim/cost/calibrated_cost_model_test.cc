#include "sim/cost/calibrated_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "sim/config/config_error.h"
#include "sim/cost/cost_model_factory.h"
#include "sim/cost/roofline.h"

namespace moesim::sim {
namespace {

OpFit linear_fit(const std::string& kind, double intercept_s, double s_per_byte, double s_per_flop,
                 double max_value) {
  OpFit f;
  f.kind = kind;
  f.dtype = "bf16";
  f.features = {FitFeature::kFlops, FitFeature::kBytes};
  f.segments.push_back(FitSegment{});
  f.segments[0].intercept_s = intercept_s;
  f.segments[0].s_per_byte = s_per_byte;
  f.segments[0].s_per_flop = s_per_flop;
  f.range = FitRange{0, max_value, 0, max_value, 0, max_value};
  return f;
}

// A fallback that answers a recognisable constant.
class ConstantModel final : public CostModel {
 public:
  std::string_view name() const override { return "constant"; }
  double seconds(const OpWork&) const override { return 42.0; }
};

CalibrationProfile profile() {
  CalibrationProfile p;
  p.name = "test";
  p.ops.push_back(linear_fit("rmsnorm", 1e-6, 1e-9, 0, 1e9));
  p.ops.push_back(linear_fit("permute", 1e-6, 1e-9, 0, 1e9));
  p.ops.push_back(linear_fit("unpermute", 2e-6, 1e-9, 0, 1e9));
  p.ops.push_back(linear_fit("dense_ffn", 3e-6, 0, 1e-12, 1e12));
  return p;
}

OpWork work(OpKind kind, double flops, double bytes, int64_t tokens) {
  OpWork w;
  w.kind = kind;
  w.dtype = DType::kBF16;
  w.flops = flops;
  w.bytes = bytes;
  w.tokens = tokens;
  return w;
}

TEST(CalibratedCostModel, RmsNormQueryIsHalfOfBothNorms) {
  CalibratedCostModel m(profile(), std::make_unique<ConstantModel>());
  // Simulator: one norm, 1000 bytes; profile: both norms at 2000 bytes = 1 us + 2 us.
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kRmsNorm, 0, 1000, 4)), 0.5 * 3e-6);
}

TEST(CalibratedCostModel, PermuteIncludesUnpermute) {
  CalibratedCostModel m(profile(), std::make_unique<ConstantModel>());
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kPermute, 0, 1000, 8)), (1e-6 + 1e-6) + (2e-6 + 1e-6));
}

TEST(CalibratedCostModel, LmHeadUsesItsOwnFit) {
  CalibrationProfile p = profile();
  p.ops.push_back(linear_fit("lm_head", 5e-6, 1e-10, 2e-12, 1e12));
  CalibratedCostModel m(p, std::make_unique<ConstantModel>());
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kLmHead, 1e9, 1e6, 2)), 5e-6 + 1e-4 + 2e-3);
  EXPECT_EQ(m.num_proxy_queries(), 0);
  EXPECT_EQ(m.num_out_of_range_queries(), 0);
}

TEST(CalibratedCostModel, LmHeadWithoutItsFitUsesTheDenseFfnFitAsProxyAndCountsIt) {
  // Profiles fitted before the engine ran the output head.
  CalibratedCostModel m(profile(), std::make_unique<ConstantModel>());
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kLmHead, 1e9, 10, 2)), 3e-6 + 1e-3);
  EXPECT_EQ(m.num_proxy_queries(), 1);
  EXPECT_EQ(m.num_out_of_range_queries(OpKind::kLmHead), 1);
}

TEST(CalibratedCostModel, CountsOutOfRangeAndMissingKinds) {
  CalibratedCostModel m(profile(), std::make_unique<ConstantModel>());
  m.seconds(work(OpKind::kDenseFfn, 1e13, 10, 2));  // FLOPs above the fitted range
  EXPECT_EQ(m.num_out_of_range_queries(OpKind::kDenseFfn), 1);
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, 1e6, 10, 2)), 42.0);  // no fit: fallback
  EXPECT_EQ(m.num_out_of_range_queries(OpKind::kExpertFfn), 1);
  EXPECT_EQ(m.num_out_of_range_queries(), 2);
  EXPECT_EQ(m.seconds(OpWork{}), 0.0);
  const CostQueryCounts q = m.query_counts();
  EXPECT_EQ(q.out_of_range[static_cast<int>(OpKind::kDenseFfn)], 1);
  EXPECT_EQ(q.out_of_range[static_cast<int>(OpKind::kExpertFfn)], 1);
  EXPECT_EQ(q.by_rule[static_cast<int>(OpKind::kExpertFfn)], 0);
}

TEST(CalibratedCostModel, OtherDtypeIsUsedButCounted) {
  CalibratedCostModel m(profile(), std::make_unique<ConstantModel>());
  OpWork w = work(OpKind::kDenseFfn, 1e6, 10, 2);
  w.dtype = DType::kFP8;
  EXPECT_DOUBLE_EQ(m.seconds(w), 3e-6 + 1e-6);
  EXPECT_EQ(m.num_out_of_range_queries(), 1);
}

TEST(CostModelFactory, RooflineByDefault) {
  CostSpec spec;
  GpuSpec gpu;
  gpu.bf16_flops_per_s = 1e15;
  gpu.hbm_bytes_per_s = 4e12;
  EXPECT_EQ(make_cost_model(spec, gpu)->name(), "roofline");
  EXPECT_EQ(make_calibrated_cost_model(profile(), spec, gpu)->name(), "calibrated");
}

TEST(CostModelFactory, MissingProfileIsAConfigError) {
  EXPECT_THROW(load_profile("/nonexistent/profile.toml"), ConfigError);
}

TEST(CostModelFactory, CalibratedSpecUsesItsResolvedProfile) {
  CostSpec spec;
  spec.kind = CostModelKind::kCalibrated;
  spec.profile = std::make_shared<const CalibrationProfile>(profile());
  EXPECT_EQ(make_cost_model(spec, GpuSpec{})->name(), "calibrated");
}

// An absurd seconds-per-FLOP (a profile built in code: the reader refuses s_per_flop > 1) made
// every op take centuries, which rounded to a negative or tiny duration (issue 19).
TEST(CalibratedCostModel, ADurationBeyondTheHorizonIsAnErrorNamingTheOpAndTheProfile) {
  CalibrationProfile p = profile();
  p.ops.push_back(linear_fit("expert_ffn", 0, 0, 1e300, 1e12));
  GpuSpec gpu;
  gpu.name = "test-gpu";
  CalibratedCostModel m(p, std::make_unique<RooflineCostModel>(gpu, RooflineParams::defaults()));
  const OpWork w = work(OpKind::kExpertFfn, 2e9, 1e6, 16);
  EXPECT_TRUE(std::isinf(m.seconds(w)));  // the unchecked answer: 1e300 x 2e9
  try {
    m.checked_seconds(w);
    FAIL() << "expected HorizonError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "cost model 'calibrated': expert_ffn (bf16, 2e+09 FLOPs, 1e+06 bytes, 16 "
                 "tokens) takes inf s, beyond the 100-year horizon (3.156e+09 s): check the "
                 "coefficients of calibration profile 'test' (op kinds it has no fit for: the "
                 "peak FLOP/s and HBM bandwidth of GPU 'test-gpu' ([gpu] in the topology) and "
                 "[cost.roofline])");
  }
  // Within the horizon the checked answer is the answer.
  EXPECT_EQ(m.checked_seconds(work(OpKind::kRmsNorm, 0, 1000, 4)),
            m.seconds(work(OpKind::kRmsNorm, 0, 1000, 4)));
}

}  // namespace
}  // namespace moesim::sim
