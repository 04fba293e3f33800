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

namespace moesim::sim {
namespace {

// A kernel-level profile on round peaks (BF16 1e15, FP8 2e15 FLOP/s, HBM 1e12 B/s): one dense FP8
// GEMM fit over 64-4096 rows (compute 0.5, input and output 0.5), a ceiling of 0.8 of HBM below
// them, a BF16 prefill core (compute 0.5, 100 keys per query of fixed cost, 256-8192 keys).
GpuSpec round_gpu() {
  GpuSpec g;
  g.name = "round";
  g.bf16_flops_per_s = 1e15;
  g.fp8_flops_per_s = 2e15;
  g.hbm_bytes_per_s = 1e12;
  return g;
}

CalibrationProfile kernel_profile() {
  CalibrationProfile p;
  p.name = "kernels";
  p.compute.gpu = "round";
  GemmFit d;
  d.layout = GemmLayout::kDense;
  d.dtype = "fp8";
  d.compute_efficiency = d.input_bandwidth_efficiency = d.output_bandwidth_efficiency = 0.5;
  d.m_per_group_min = 64;
  d.m_per_group_max = 4096;
  p.compute.gemms.push_back(d);
  p.compute.gemm_max_bandwidth_efficiency = 0.8;
  AttentionCoreFit a;
  a.kind = "attn_gqa_prefill";
  a.dtype = "bf16";
  a.compute_efficiency = 0.5;
  a.bandwidth_efficiency = 1e3;
  a.query_overhead_keys = 100;
  a.keys_per_query_min = 256;
  a.keys_per_query_max = 8192;
  p.compute.attention.push_back(a);
  return p;
}

CalibratedCostModel kernel_model() {
  return CalibratedCostModel(kernel_profile(), std::make_unique<ConstantModel>(), round_gpu());
}

// A dense FP8 SwiGLU (shared expert) of `rows` rows: hidden 1024, intermediate 512.
OpWork ffn(int64_t rows) {
  OpWork w = work(OpKind::kSharedExpert, 1, 1, rows);
  w.dtype = DType::kFP8;
  w.hidden = 1024;
  w.ffn_intermediate = 512;
  return w;
}

// The fit's seconds of the two GEMMs (gate/up n 1024, k 1024; down n 1024, k 512) at `rows`.
double ffn_by_hand(double rows) {
  auto gemm = [rows](double n, double k) {
    return 2 * rows * n * k / (2e15 * 0.5) + (rows * k + n * k) / (1e12 * 0.5) +
           2 * rows * n / (1e12 * 0.5);
  };
  return gemm(1024, 1024) + gemm(1024, 512);
}

TEST(CalibratedCostModelRules, GemmInsideItsRowsIsTheFit) {
  const CalibratedCostModel m = kernel_model();
  EXPECT_DOUBLE_EQ(m.seconds(ffn(1024)), ffn_by_hand(1024));
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kSharedExpert), 0);
  EXPECT_EQ(m.num_out_of_range_queries(), 0);
}

TEST(CalibratedCostModelRules, GemmAboveItsRowsRunsAtTheLargestRowsRate) {
  const CalibratedCostModel m = kernel_model();
  // 16,384 rows: 4 x the time of 4,096 rows (the fit alone would amortise the weights).
  const double s = m.seconds(ffn(16384));
  EXPECT_DOUBLE_EQ(s, 4.0 * ffn_by_hand(4096));
  EXPECT_GT(s, ffn_by_hand(16384));
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kSharedExpert), 1);
  EXPECT_EQ(m.num_out_of_range_queries(), 0);
}

TEST(CalibratedCostModelRules, GemmBelowItsRowsIsFlooredByItsBytesAtTheCeiling) {
  const CalibratedCostModel m = kernel_model();
  // 8 rows: the weights dominate; the fit reads them at 0.5 of HBM, slower than the 0.8 ceiling,
  // so the fit holds. With an input efficiency of 2 (weights read "under" the math) the floor
  // binds: all bytes at 0.8 of HBM.
  EXPECT_DOUBLE_EQ(m.seconds(ffn(8)), ffn_by_hand(8));
  CalibrationProfile p = kernel_profile();
  p.compute.gemms[0].input_bandwidth_efficiency = 2.0;
  const CalibratedCostModel fast(p, std::make_unique<ConstantModel>(), round_gpu());
  const double bytes =
      (8.0 * 1024 + 1024.0 * 1024 + 2 * 8.0 * 1024) + (8.0 * 512 + 1024.0 * 512 + 2 * 8.0 * 1024);
  EXPECT_DOUBLE_EQ(fast.seconds(ffn(8)), bytes / (1e12 * 0.8));
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kSharedExpert), 1);
  EXPECT_EQ(fast.num_by_rule_queries(OpKind::kSharedExpert), 1);
  // Without a ceiling in the profile there is no rule: out of range.
  p.compute.gemm_max_bandwidth_efficiency = 0;
  const CalibratedCostModel none(p, std::make_unique<ConstantModel>(), round_gpu());
  none.seconds(ffn(8));
  EXPECT_EQ(none.num_out_of_range_queries(OpKind::kSharedExpert), 1);
}

// A GQA prefill op whose projections have no FLOPs (all FLOPs in the core) of `tokens` queries
// attending `keys` keys each, 1,000 FLOPs per (query, key) pair, at `core` dtype. Its projections
// still write their output, 2 x tokens x hidden bytes at the dense fit's 0.5 of HBM.
OpWork prefill(int64_t tokens, double keys, DType core) {
  OpWork w = work(OpKind::kAttnGqaPrefill, 0, 0, tokens);
  w.dtype = DType::kFP8;
  w.hidden = 1024;
  w.attended_pairs = static_cast<double>(tokens) * keys;
  w.core_flops = w.flops = w.attended_pairs * 1000;
  w.core_bytes = w.bytes = 1e6;
  w.core_dtype = core;
  return w;
}

double projections_s(double tokens) { return 2 * tokens * 1024 / (1e12 * 0.5); }

TEST(CalibratedCostModelRules, PrefillCoreCostsItsFlopsPlusAFixedCostPerQuery) {
  const CalibratedCostModel m = kernel_model();
  // 1,024 queries x 1,024 keys: (pairs + 100 keys x queries) x 1,000 FLOPs / (1e15 x 0.5).
  const double pairs = 1024.0 * 1024;
  const double in_range = projections_s(1024) + (pairs + 100.0 * 1024) * 1000 / (1e15 * 0.5);
  EXPECT_NEAR(m.seconds(prefill(1024, 1024, DType::kBF16)), in_range, 1e-15);
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kAttnGqaPrefill), 0);
  EXPECT_EQ(m.num_out_of_range_queries(), 0);
  // Beyond the most keys fitted: the rate at 8,192 keys per query.
  const double beyond =
      projections_s(1024) + 1024.0 * 16384 * 1000 * (1 + 100.0 / 8192) / (1e15 * 0.5);
  EXPECT_NEAR(m.seconds(prefill(1024, 16384, DType::kBF16)), beyond, 1e-15);
  // Below the fewest: the fixed cost per query holds.
  const double below = projections_s(1024) + (1024.0 * 64 + 100.0 * 1024) * 1000 / (1e15 * 0.5);
  EXPECT_NEAR(m.seconds(prefill(1024, 64, DType::kBF16)), below, 1e-15);
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kAttnGqaPrefill), 2);
  EXPECT_EQ(m.num_out_of_range_queries(), 0);
}

TEST(CalibratedCostModelRules, Fp8CoreWithoutItsFitRunsAsTheBf16Kernel) {
  const CalibratedCostModel m = kernel_model();
  const double bf16 = m.seconds(prefill(1024, 1024, DType::kBF16));
  EXPECT_DOUBLE_EQ(m.seconds(prefill(1024, 1024, DType::kFP8)), bf16);
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kAttnGqaPrefill), 1);
  EXPECT_EQ(m.num_out_of_range_queries(), 0);
}

TEST(CalibratedCostModelRules, KindsNoKernelTableCoversAreRooflineByRuleOthersOutOfRange) {
  const CalibratedCostModel m = kernel_model();
  EXPECT_EQ(m.seconds(work(OpKind::kRmsNorm, 0, 1e6, 8)), 42.0);
  EXPECT_EQ(m.seconds(work(OpKind::kCombine, 0, 1e6, 8)), 42.0);
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kRmsNorm), 1);
  EXPECT_EQ(m.num_by_rule_queries(OpKind::kCombine), 1);
  // An attention kind without a core fit is a gap in the tables, not a rule.
  OpWork decode = prefill(8, 1024, DType::kBF16);
  decode.kind = OpKind::kAttnGqaDecode;
  EXPECT_EQ(m.seconds(decode), 42.0);
  EXPECT_EQ(m.num_out_of_range_queries(OpKind::kAttnGqaDecode), 1);
  EXPECT_EQ(m.num_out_of_range_queries(), 1);
}

}  // namespace
}  // namespace moesim::sim
