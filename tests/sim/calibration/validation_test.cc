// validate() on a hand-made case: two GPUs, a dense layer and an MoE layer, one recorded step
// (tests/data/calibration/trace_small.jsonl), measured and simulated times chosen so that every
// statistic has a value worked out by hand below.
#include "sim/calibration/validation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace moesim::sim {
namespace {

constexpr double kUs = 1e-6;

OpSample op(int32_t gpu, int32_t layer, const std::string& name, double us) {
  OpSample s;
  s.step = 0;
  s.sim_gpu = gpu;
  s.layer_idx = layer;
  s.op = name;
  s.dtype = "bf16";
  s.tokens = 3;
  s.bytes = 1000;
  s.measured = true;
  s.measured_ns = static_cast<int64_t>(us * 1000);
  s.min_ns = s.max_ns = s.measured_ns;
  return s;
}

struct Case {
  MeasurementSet meas;
  CalibrationProfile profile;
  StepTraceFile trace;
  ValidationInput input;
};

// Measured per GPU (us): layer 0 attention (rmsnorm + attn) 30 | 10; layer 1 router 5 | 5,
// experts 30 | 50. Simulated: attention 33 | 11, router 5 | 5, experts 30 | 60.
// Collectives (simulated on both sides): dispatch 2, combine 3; lm_head 1 per GPU.
void build(Case& c) {
  c.trace =
      read_step_trace(std::string(MOESIM_SOURCE_DIR) + "/tests/data/calibration/trace_small.jsonl");
  c.meas.file = "/scratch/dir/meas.jsonl";
  c.meas.ops = {op(0, 0, "rmsnorm", 10), op(0, 0, "attn_mla_prefill", 20),
                op(0, 1, "router", 5),   op(0, 1, "expert_ffn", 30),
                op(1, 0, "rmsnorm", 4),  op(1, 0, "attn_mla_decode", 6),
                op(1, 1, "router", 5),   op(1, 1, "expert_ffn", 50)};
  OpSample a2a = op(0, 1, "dispatch_a2a", 0);
  a2a.measured = false;
  a2a.measured_ns = 0;
  c.meas.ops.push_back(a2a);  // not measured: ignored everywhere

  // One fit: rmsnorm predicts a constant 12 us (+20% and +200% on the two records).
  OpFit norm;
  norm.kind = "rmsnorm";
  norm.dtype = "bf16";
  norm.features = {FitFeature::kBytes};
  norm.segments = {FitSegment{}};
  norm.segments[0].intercept_s = 12 * kUs;
  norm.range = FitRange{0, 0, 500, 2000, 1, 10};
  c.profile.name = "hand";
  c.profile.ops = {norm};

  ResimulatedStep s;
  s.step = 0;
  s.replica = 0;
  s.gpus = {0, 1};
  s.phase_s.assign(2, std::vector<std::array<double, kNumPhases>>(2, {0, 0, 0, 0}));
  s.phase_s[0][0][static_cast<int>(Phase::kAttention)] = 33 * kUs;
  s.phase_s[1][0][static_cast<int>(Phase::kAttention)] = 11 * kUs;
  for (int g = 0; g < 2; ++g) s.phase_s[g][1][static_cast<int>(Phase::kRouter)] = 5 * kUs;
  s.phase_s[0][1][static_cast<int>(Phase::kExperts)] = 30 * kUs;
  s.phase_s[1][1][static_cast<int>(Phase::kExperts)] = 60 * kUs;
  s.dispatch_s = {0, 2 * kUs};
  s.combine_s = {0, 3 * kUs};
  s.lm_head_s = {1 * kUs, 1 * kUs};
  // Simulated composition: clocks 38 | 16 -> dispatch at 40 -> 70 | 100 -> combine at 103 ->
  // lm_head 104 us.
  s.duration_s = 104 * kUs;

  c.input.measurements = &c.meas;
  c.input.profile = &c.profile;
  c.input.trace = &c.trace;
  c.input.steps = {s};
  c.input.measured_layer_of_layer = {0, 1};
  c.input.is_moe_layer = {false, true};
  c.input.num_out_of_range_queries = 7;
}

TEST(Validation, StatisticsOfAHandMadeStep) {
  Case c;
  build(c);
  ValidationReport r = validate(c.input);
  EXPECT_EQ(r.measurement_file, "meas.jsonl");  // no directories in reports
  EXPECT_EQ(r.trace_file, "trace_small.jsonl");
  EXPECT_EQ(r.profile_name, "hand");

  // Per op: only rmsnorm has a fit; 6 measured records have none.
  ASSERT_EQ(r.by_op.size(), 1u);
  const ErrorStats& norm = r.by_op.at("rmsnorm");
  EXPECT_EQ(norm.num_samples, 2);
  EXPECT_NEAR(norm.mape, (0.2 + 2.0) / 2, 1e-9);
  EXPECT_NEAR(norm.mean_rel_error, 1.1, 1e-9);
  EXPECT_EQ(r.num_ops_without_fit, 6);
  EXPECT_EQ(r.num_ops_out_of_range, 0);

  // Per phase: attention +10% on both GPUs; experts 0% and +20%; router exact.
  const ErrorStats& attn = r.by_phase[static_cast<int>(Phase::kAttention)];
  EXPECT_EQ(attn.num_samples, 2);
  EXPECT_NEAR(attn.mape, 0.1, 1e-9);
  const ErrorStats& experts = r.by_phase[static_cast<int>(Phase::kExperts)];
  EXPECT_NEAR(experts.mape, 0.1, 1e-9);
  EXPECT_NEAR(r.by_phase[static_cast<int>(Phase::kRouter)].mape, 0.0, 1e-12);
  EXPECT_EQ(r.by_phase[static_cast<int>(Phase::kDenseFfn)].num_samples, 0);

  // Per step (per GPU compute): measured 65 | 65 us, simulated 68 | 76 us.
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_NEAR(r.steps[0].measured_compute_s, 65 * kUs, 1e-12);
  EXPECT_NEAR(r.steps[1].simulated_compute_s, 76 * kUs, 1e-12);
  EXPECT_NEAR(r.per_step.mape, (3.0 / 65 + 11.0 / 65) / 2, 1e-9);

  // Composed durations: measured 30 | 10 -> 35 | 15 -> dispatch at 37 -> 67 | 87 -> combine
  // at 90 -> 91 us; simulated 104 us, equal to the StepModel's.
  ASSERT_EQ(r.step_durations.size(), 1u);
  EXPECT_NEAR(r.step_durations[0][1], 91 * kUs, 1e-12);
  EXPECT_NEAR(r.step_durations[0][2], 104 * kUs, 1e-12);
  EXPECT_NEAR(r.step_duration.mape, 13.0 / 91, 1e-9);
  EXPECT_NEAR(r.max_composition_error_s, 0.0, 1e-12);

  // End to end: request 7 prefills in this step, so its TTFT is the step's duration.
  EXPECT_TRUE(r.end_to_end_note.empty());
  bool found = false;
  for (const EndToEndMetric& m : r.end_to_end) {
    if (m.name != "ttft_p50_ms") continue;
    found = true;
    EXPECT_NEAR(m.simulated, 0.104, 1e-9);
    EXPECT_NEAR(m.measured, 0.091, 1e-9);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(r.num_out_of_range_queries, 7);
}

TEST(Validation, ComposesOverlappedMicroBatches) {
  Case c;
  build(c);
  ResimulatedStep& s = c.input.steps[0];
  s.overlap = OverlapMode::kSimple;
  s.dispatch_s = {0, 5 * kUs};  // dispatch + combine
  s.combine_s = {0, 0};
  // Simulated: clocks 38 | 16 before the MoE layer; it starts at 16, C = max(38 - 16 + 30,
  // 0 + 60) = 60, D = 5: ends at 16 + 60 + 2.5 = 78.5, lm_head 79.5 us (the StepModel's).
  s.duration_s = 79.5 * kUs;
  ValidationReport r = validate(c.input);
  EXPECT_NEAR(r.max_composition_error_s, 0.0, 1e-12);
  // Measured: clocks 35 | 15; C = max(35 - 15 + 30, 0 + 50) = 50: 15 + 50 + 2.5 + 1 = 68.5 us.
  ASSERT_EQ(r.step_durations.size(), 1u);
  EXPECT_NEAR(r.step_durations[0][1], 68.5 * kUs, 1e-12);
  EXPECT_NEAR(r.step_durations[0][2], 79.5 * kUs, 1e-12);
}

TEST(Validation, MoeLayerWithoutRemoteTokensKeepsItsBarriers) {
  Case c;
  build(c);
  ResimulatedStep& s = c.input.steps[0];
  s.dispatch_s = {0, 0};  // every token served on its own GPU: no collective time
  s.combine_s = {0, 0};
  // Simulated: 38 | 16 -> barrier 38 -> experts 68 | 98 -> barrier 98 -> lm_head 99 us.
  s.duration_s = 99 * kUs;
  ValidationReport r = validate(c.input);
  EXPECT_NEAR(r.max_composition_error_s, 0.0, 1e-12);
  // Measured: 35 | 15 -> 35 -> 65 | 85 -> 85 -> 86 us.
  ASSERT_EQ(r.step_durations.size(), 1u);
  EXPECT_NEAR(r.step_durations[0][1], 86 * kUs, 1e-12);
}

TEST(Validation, MissingGpuDisablesEndToEnd) {
  Case c;
  build(c);
  std::vector<OpSample> gpu0;
  for (const OpSample& s : c.meas.ops) {
    if (s.sim_gpu == 0) gpu0.push_back(s);
  }
  c.meas.ops = gpu0;
  ValidationReport r = validate(c.input);
  EXPECT_EQ(r.steps.size(), 1u);  // GPU 0 only
  EXPECT_TRUE(r.step_durations.empty());
  EXPECT_TRUE(r.end_to_end.empty());
  EXPECT_FALSE(r.end_to_end_note.empty());
}

}  // namespace
}  // namespace moesim::sim
