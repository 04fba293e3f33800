// Roofline cost model: compute- vs memory-bound ops, the dtype peak fallback, per-op overheads,
// and parsing of [cost.roofline] tables.
#include "sim/cost/roofline.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/config/toml_source.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

GpuSpec h200() { return *find_gpu_spec("h200-sxm"); }

// A GPU with round numbers: 1e15 BF16, 2e15 FP8, no FP4, 1e12 bytes/s.
GpuSpec round_gpu() {
  GpuSpec g;
  g.name = "round";
  g.fp32_flops_per_s = 1e14;
  g.bf16_flops_per_s = 1e15;
  g.fp8_flops_per_s = 2e15;
  g.hbm_bytes = 1'000'000'000;
  g.hbm_bytes_per_s = 1e12;
  return g;
}

// Efficiency 1 and no overhead everywhere, so durations are the bare roofline.
RooflineParams ideal_params() {
  RooflineParams p = RooflineParams::defaults();
  for (OpEfficiency& e : p.ops) e = OpEfficiency{1.0, 1.0, 0.0};
  return p;
}

OpWork work(OpKind kind, DType dtype, double flops, double bytes) {
  OpWork w;
  w.kind = kind;
  w.dtype = dtype;
  w.flops = flops;
  w.bytes = bytes;
  w.tokens = 1;
  return w;
}

TEST(RooflineTest, ComputeBoundOpTakesFlopsOverPeak) {
  RooflineCostModel m(round_gpu(), ideal_params());
  // 1e12 FLOPs at 1e15 = 1 ms; 1e6 bytes at 1e12 = 1 us.
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kBF16, 1e12, 1e6)), 1e-3);
}

TEST(RooflineTest, MemoryBoundOpTakesBytesOverBandwidth) {
  RooflineCostModel m(round_gpu(), ideal_params());
  // 1e9 FLOPs = 1 us of compute; 1e9 bytes = 1 ms of HBM.
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kAttnMlaDecode, DType::kBF16, 1e9, 1e9)), 1e-3);
}

TEST(RooflineTest, EfficienciesDivideThePeaks) {
  RooflineParams p = ideal_params();
  p.ops[static_cast<int>(OpKind::kExpertFfn)] = OpEfficiency{0.5, 0.25, 0.0};
  RooflineCostModel m(round_gpu(), p);
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kBF16, 1e12, 0)), 2e-3);
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kBF16, 0, 1e9)), 4e-3);
}

TEST(RooflineTest, OverheadIsAddedToNonEmptyWorkOnly) {
  RooflineParams p = ideal_params();
  p.ops[static_cast<int>(OpKind::kRouter)].overhead_us = 5.0;
  RooflineCostModel m(round_gpu(), p);
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kRouter, DType::kBF16, 1e12, 0)), 1e-3 + 5e-6);
  OpWork empty;
  empty.kind = OpKind::kRouter;
  EXPECT_EQ(m.seconds(empty), 0.0);
}

TEST(RooflineTest, APeakOfAlmostNothingIsAnErrorBeyondTheHorizon) {
  // A GPU spec built in code (the topology reader refuses peaks below 1 FLOP/s).
  GpuSpec g = round_gpu();
  g.bf16_flops_per_s = 1e-300;
  RooflineCostModel m(g, ideal_params());
  EXPECT_EQ(testing::config_error_of(
                [&] { m.checked_seconds(work(OpKind::kDenseFfn, DType::kBF16, 1e6, 1e6)); }),
            "cost model 'roofline': dense_ffn (bf16, 1e+06 FLOPs, 1e+06 bytes, 1 tokens) takes "
            "1e+306 s, beyond the 100-year horizon (3.156e+09 s): check the peak FLOP/s and HBM "
            "bandwidth of GPU 'round' ([gpu] in the topology) and [cost.roofline]");
  // The same work on the round GPU: checked_seconds() is seconds().
  RooflineCostModel ok(round_gpu(), ideal_params());
  const OpWork w = work(OpKind::kDenseFfn, DType::kBF16, 1e12, 1e6);
  EXPECT_EQ(ok.checked_seconds(w), ok.seconds(w));
}

TEST(RooflineTest, DefaultsMatchTheDocumentedExpertFfnEntry) {
  RooflineCostModel m(round_gpu(), RooflineParams::defaults());
  // expert_ffn: compute 0.65, bandwidth 0.8, 4 us.
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kBF16, 0.65e12, 0)), 1e-3 + 4e-6);
}

TEST(RooflineTest, Fp8RunsAtTwiceTheBf16Rate) {
  RooflineCostModel m(round_gpu(), ideal_params());
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kFP8, 2e12, 0)), 1e-3);
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kMXFP8, 2e12, 0)), 1e-3);
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kFP16, 1e12, 0)), 1e-3);
}

TEST(RooflineTest, PeakFallsBackToTheNextWiderDtype) {
  const GpuSpec g = h200();
  ASSERT_EQ(g.fp4_flops_per_s, 0.0);
  // MXFP4 / NVFP4 weights on H200 are up-cast: the FP8 peak.
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(g, DType::kMXFP4), g.fp8_flops_per_s);
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(g, DType::kNVFP4), g.fp8_flops_per_s);
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(g, DType::kFP8), g.fp8_flops_per_s);
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(g, DType::kBF16), g.bf16_flops_per_s);
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(g, DType::kFP32), g.fp32_flops_per_s);
  // A GPU without FP8 runs FP8 and FP4 at BF16.
  GpuSpec no_fp8 = g;
  no_fp8.fp8_flops_per_s = 0;
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(no_fp8, DType::kFP8), g.bf16_flops_per_s);
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(no_fp8, DType::kMXFP4), g.bf16_flops_per_s);
  // GB200 has an FP4 path.
  const GpuSpec gb = *find_gpu_spec("gb200");
  EXPECT_DOUBLE_EQ(compute_peak_flops_per_s(gb, DType::kMXFP4), gb.fp4_flops_per_s);
}

TEST(RooflineTest, AttentionCoreRunsAtItsOwnDtype) {
  RooflineCostModel m(round_gpu(), ideal_params());
  // FP8 projections (1e12 FLOPs at 2e15) + a BF16 core (2e12 FLOPs at 1e15): 0.5 + 2 ms.
  OpWork w = work(OpKind::kAttnMlaDecode, DType::kFP8, 3e12, 0);
  w.core_flops = 2e12;
  w.core_dtype = DType::kBF16;
  EXPECT_DOUBLE_EQ(m.seconds(w), 2.5e-3);
  // A core in the projections' dtype: one quotient, as without a core.
  w.core_dtype = DType::kFP8;
  EXPECT_EQ(m.seconds(w), m.seconds(work(OpKind::kAttnMlaDecode, DType::kFP8, 3e12, 0)));
  EXPECT_DOUBLE_EQ(m.seconds(w), 1.5e-3);
  // Memory-bound: the core's dtype does not change the bytes' time.
  w = work(OpKind::kAttnMlaDecode, DType::kFP8, 3e12, 1e10);
  w.core_flops = 2e12;
  w.core_dtype = DType::kBF16;
  EXPECT_DOUBLE_EQ(m.seconds(w), 1e-2);
}

TEST(RooflineTest, Mxfp4OnH200CostsLikeFp8) {
  RooflineCostModel m(h200(), ideal_params());
  const double flops = 1e13;
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kMXFP4, flops, 0)),
                   m.seconds(work(OpKind::kExpertFfn, DType::kFP8, flops, 0)));
  EXPECT_DOUBLE_EQ(m.seconds(work(OpKind::kExpertFfn, DType::kFP8, flops, 0)),
                   flops / h200().fp8_flops_per_s);
}

TEST(RooflineTest, DurationGrowsWithWork) {
  RooflineCostModel m(h200(), RooflineParams::defaults());
  double prev = 0;
  for (double f = 1e9; f <= 1e15; f *= 10) {
    double s = m.seconds(work(OpKind::kDenseFfn, DType::kBF16, f, f / 100));
    EXPECT_GT(s, prev) << f;
    prev = s;
  }
}

RooflineParams parse(const std::string& text) {
  TomlDocument doc = TomlDocument::parse_string(text, "s.toml");
  TomlTable root = doc.root();
  TomlTable t = root.get_table("roofline");
  return parse_roofline_params(t);
}

std::string parse_error(const std::string& text) {
  return testing::config_error_of([&] { parse(text); }, "(no error)");
}

TEST(RooflineParseTest, OverridesOnlyTheGivenKeys) {
  RooflineParams p = parse(
      "[roofline.expert_ffn]\ncompute_efficiency = 0.9\n"
      "[roofline.rmsnorm]\noverhead_us = 0\n");
  const RooflineParams d = RooflineParams::defaults();
  const OpEfficiency& e = p.ops[static_cast<int>(OpKind::kExpertFfn)];
  EXPECT_EQ(e.compute_efficiency, 0.9);
  EXPECT_EQ(e.bandwidth_efficiency,
            d.ops[static_cast<int>(OpKind::kExpertFfn)].bandwidth_efficiency);
  EXPECT_EQ(e.overhead_us, d.ops[static_cast<int>(OpKind::kExpertFfn)].overhead_us);
  EXPECT_EQ(p.ops[static_cast<int>(OpKind::kRmsNorm)].overhead_us, 0.0);
  EXPECT_EQ(p.ops[static_cast<int>(OpKind::kRouter)].compute_efficiency,
            d.ops[static_cast<int>(OpKind::kRouter)].compute_efficiency);
}

TEST(RooflineParseTest, UnknownOpKindListsTheValidOnes) {
  EXPECT_EQ(parse_error("[roofline.attn_mla]\ncompute_efficiency = 0.5\n"),
            "s.toml:1:1: roofline.attn_mla: unknown op kind 'attn_mla' (valid: rmsnorm, "
            "attn_mla_prefill, attn_mla_decode, attn_gqa_prefill, attn_gqa_decode, "
            "attn_kda_prefill, attn_kda_decode, "
            "router, permute, expert_ffn, shared_expert, dense_ffn, combine, lm_head, "
            "dispatch_a2a, combine_a2a)");
}

TEST(RooflineParseTest, OutOfRangeEfficiencyIsAnError) {
  EXPECT_EQ(parse_error("[roofline.expert_ffn]\ncompute_efficiency = 1.5\n"),
            "s.toml:2:22: roofline.expert_ffn.compute_efficiency: value 1.5 is out of range "
            "[1e-06, 1]");
  EXPECT_EQ(parse_error("[roofline.expert_ffn]\nbandwidth_efficiency = 0\n"),
            "s.toml:2:24: roofline.expert_ffn.bandwidth_efficiency: value 0 is out of range "
            "[1e-06, 1]");
  EXPECT_EQ(parse_error("[roofline.router]\noverhead_us = -1\n"),
            "s.toml:2:15: roofline.router.overhead_us: value -1 is out of range [0, 1000000]");
}

TEST(RooflineParseTest, UnknownKeyInsideAnOpTableIsAnError) {
  EXPECT_EQ(parse_error("[roofline.router]\ncompute_eff = 0.5\n"),
            "s.toml:2:1: roofline.router.compute_eff: unknown key 'compute_eff' (valid keys: "
            "bandwidth_efficiency, compute_efficiency, overhead_us)");
}

}  // namespace
}  // namespace moesim::sim
