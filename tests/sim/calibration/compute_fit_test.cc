#include "sim/calibration/compute_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/cost/profile.h"

namespace moesim::sim {
namespace {

// Round peaks: FP8 2e15, BF16 1e15 FLOP/s, HBM 1e12 bytes/s.
GpuSpec round_gpu() {
  GpuSpec g;
  g.name = "round";
  g.bf16_flops_per_s = 1e15;
  g.fp8_flops_per_s = 2e15;
  g.hbm_bytes_per_s = 1e12;
  return g;
}

GemmSample sample(const std::string& layout, int64_t groups, int64_t m, int64_t n, int64_t k,
                  double c, double i, double o) {
  GemmSample s{layout, "fp8", groups, m, n, k, 0};
  const double rows = static_cast<double>(groups * m);
  const double flops = 2.0 * rows * static_cast<double>(n * k);
  const double in = rows * static_cast<double>(k) + static_cast<double>(groups * n * k);
  const double out = 2.0 * rows * static_cast<double>(n);
  s.measured_s = flops / (2e15 * c) + in / (1e12 * i) + out / (1e12 * o);
  return s;
}

TEST(ComputeFit, RecoversGemmEfficienciesPerLayout) {
  // Contiguous: compute 0.8, input 0.5; dense: compute 0.6, input 0.9; output 0.7 shared.
  std::vector<GemmSample> s;
  for (int64_t m : {1024, 4096}) {
    for (int64_t n : {4096, 7168}) {
      s.push_back(sample("contiguous_grouped", 4, m, n, n == 4096 ? 7168 : 2048, 0.8, 0.5, 0.7));
      s.push_back(sample("dense", 1, m / 16, n, n == 4096 ? 7168 : 2048, 0.6, 0.9, 0.7));
    }
  }
  const ComputeFitReport r = fit_compute(s, {}, round_gpu());
  ASSERT_EQ(r.calibration.gemms.size(), 2u);
  const GemmFit* c = r.calibration.find_gemm(GemmLayout::kContiguousGrouped, "fp8");
  const GemmFit* d = r.calibration.find_gemm(GemmLayout::kDense, "fp8");
  ASSERT_TRUE(c && d);
  EXPECT_NEAR(c->compute_efficiency, 0.8, 1e-6);
  EXPECT_NEAR(c->input_bandwidth_efficiency, 0.5, 1e-6);
  EXPECT_NEAR(c->output_bandwidth_efficiency, 0.7, 1e-6);
  EXPECT_NEAR(d->compute_efficiency, 0.6, 1e-6);
  EXPECT_NEAR(d->input_bandwidth_efficiency, 0.9, 1e-6);
  EXPECT_NEAR(d->output_bandwidth_efficiency, 0.7, 1e-6);
  EXPECT_EQ(c->m_per_group_min, 1024);
  EXPECT_EQ(c->m_per_group_max, 4096);
  EXPECT_EQ(d->m_per_group_min, 64);
  EXPECT_LT(c->quality.mape, 1e-9);
  ASSERT_EQ(r.rows.size(), s.size());
  for (const ComputeFitRow& row : r.rows) EXPECT_NEAR(row.fitted_s / row.measured_s, 1.0, 1e-9);
  // The profile round-trips the section.
  CalibrationProfile p;
  p.name = "x";
  p.compute = r.calibration;
  std::ostringstream os;
  write_profile(os, p);
  const CalibrationProfile q = parse_profile(os.str(), "x.toml");
  ASSERT_EQ(q.compute.gemms.size(), 2u);
  EXPECT_EQ(q.compute.gpu, "round");
  EXPECT_EQ(q.compute.gemms[0].compute_efficiency, p.compute.gemms[0].compute_efficiency);
  EXPECT_EQ(q.compute.gemms[1].m_per_group_max, p.compute.gemms[1].m_per_group_max);
}

TEST(ComputeFit, AttentionCoreEfficienciesFromTheirBindingLimit) {
  // Memory-bound: 1e9 bytes in 2 ms on 1e12 B/s = 0.5; compute-bound: 1e12 BF16 FLOPs in 4 ms
  // on 1e15 = 0.25. The FP8 core has no memory-bound record: it reads at the BF16 core's 0.5.
  std::vector<AttentionCoreSample> cores = {{"attn_mla_decode", "bf16", "memory", 1e9, 1e9, 2e-3},
                                            {"attn_mla_decode", "bf16", "compute", 1e12, 1e9, 4e-3},
                                            {"attn_mla_decode", "fp8", "compute", 1e12, 1e8, 1e-3}};
  const ComputeFitReport r = fit_compute({}, cores, round_gpu());
  const AttentionCoreFit* b = r.calibration.find_attention("attn_mla_decode", "bf16");
  const AttentionCoreFit* f = r.calibration.find_attention("attn_mla_decode", "fp8");
  ASSERT_TRUE(b && f);
  EXPECT_DOUBLE_EQ(b->bandwidth_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(b->compute_efficiency, 0.25);
  EXPECT_DOUBLE_EQ(f->compute_efficiency, 0.5);  // 1e12 / (1e-3 x 2e15)
  EXPECT_DOUBLE_EQ(f->bandwidth_efficiency, 0.5);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("bandwidth efficiency of bf16"), std::string::npos);
  // Every record is reproduced: max(compute, memory) with the other limit not binding.
  for (const ComputeFitRow& row : r.rows) EXPECT_NEAR(row.fitted_s / row.measured_s, 1.0, 1e-12);
}

// Prefill cores: 16,384 queries attending 256 to 8,192 keys each, generated with compute
// efficiency 0.6 and a fixed cost of 300 keys per query (BF16 peak 1e15): the fit recovers both,
// the range of keys per query and an exact quality; the profile round-trips them.
TEST(ComputeFit, PrefillCoreEfficiencyAndFixedCostPerQuery) {
  std::vector<AttentionCoreSample> cores;
  const double queries = 16384, flops_per_pair = 4096;
  for (double keys : {256.0, 1024.0, 4096.0, 8192.0}) {
    const double pairs = queries * keys;
    const double flops = pairs * flops_per_pair;
    const double s = (flops + queries * flops_per_pair * 300.0) / (1e15 * 0.6);
    cores.push_back({"attn_gqa_prefill", "bf16", "compute", flops, 1e8, s, queries, pairs});
  }
  const ComputeFitReport r = fit_compute({}, cores, round_gpu());
  const AttentionCoreFit* f = r.calibration.find_attention("attn_gqa_prefill", "bf16");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->compute_efficiency, 0.6, 1e-9);
  EXPECT_NEAR(f->query_overhead_keys, 300.0, 1e-6);
  EXPECT_EQ(f->keys_per_query_min, 256.0);
  EXPECT_EQ(f->keys_per_query_max, 8192.0);
  EXPECT_EQ(f->quality.num_samples, 4);
  EXPECT_LT(f->quality.mape, 1e-9);
  for (const ComputeFitRow& row : r.rows) EXPECT_NEAR(row.fitted_s / row.measured_s, 1.0, 1e-9);
  CalibrationProfile p;
  p.name = "x";
  p.compute = r.calibration;
  std::ostringstream os;
  write_profile(os, p);
  const CalibrationProfile q = parse_profile(os.str(), "x.toml");
  const AttentionCoreFit* g = q.compute.find_attention("attn_gqa_prefill", "bf16");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->query_overhead_keys, f->query_overhead_keys);
  EXPECT_EQ(g->keys_per_query_max, 8192.0);
  EXPECT_EQ(g->quality.num_samples, 4);
  // Records with and without queries and pairs do not mix in one (kind, dtype).
  cores.push_back({"attn_gqa_prefill", "bf16", "compute", 1e12, 1e8, 1e-3});
  EXPECT_THROW(fit_compute({}, cores, round_gpu()), std::invalid_argument);
}

// The bandwidth ceiling below the fitted rows: the most bytes per second any GEMM sample moved.
TEST(ComputeFit, GemmBandwidthCeilingIsTheFastestSampleBytesRate) {
  std::vector<GemmSample> s = {sample("dense", 1, 64, 4096, 7168, 0.5, 0.8, 0.7),
                               sample("dense", 1, 4096, 4096, 7168, 0.8, 0.8, 0.7)};
  double ceiling = 0;
  for (const GemmSample& g : s) {
    const double rows = static_cast<double>(g.m_per_group);
    const double bytes = rows * 7168 + 4096.0 * 7168 + 2.0 * rows * 4096;
    ceiling = std::max(ceiling, bytes / (g.measured_s * 1e12));
  }
  const ComputeFitReport r = fit_compute(s, {}, round_gpu());
  EXPECT_DOUBLE_EQ(r.calibration.gemm_max_bandwidth_efficiency, ceiling);
  EXPECT_GT(ceiling, 0.3);
}

TEST(ComputeFit, AGpuWithoutThePeakIsAnError) {
  GpuSpec g = round_gpu();
  g.fp8_flops_per_s = 0;
  EXPECT_THROW(fit_compute({sample("dense", 1, 64, 128, 128, 0.5, 0.5, 0.5)}, {}, g),
               std::invalid_argument);
}

}  // namespace
}  // namespace moesim::sim
