// Grouped expert FFN reference against per-expert loops, BF16 and FP8 weights.
#include <gtest/gtest.h>

#include <cmath>

#include "../test_util.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine {
namespace {

constexpr int64_t kHidden = 16, kInter = 8;

// Per-expert loop: y = (silu(x Wg) * (x Wu)) Wd, with the activation rounded through `act` and,
// for FP8, rows quantised with amax / 448 scales.
std::vector<float> loop_ffn(const std::vector<float>& x, const std::vector<int64_t>& counts,
                            const std::vector<float>& gu, const std::vector<float>& down,
                            const std::vector<float>& gu_scale,
                            const std::vector<float>& down_scale, bool fp8) {
  auto quantize_row = [&](std::vector<double>& row) {
    double amax = 0;
    for (double v : row) amax = std::max(amax, std::fabs(v));
    const float scale = amax > 0 ? static_cast<float>(amax) / 448.0f : 1.0f;
    for (double& v : row) v = round_fp8e4m3(static_cast<float>(v) / scale) * scale;
  };
  std::vector<float> out(x.size(), 0.0f);
  int64_t row = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    for (int64_t i = 0; i < counts[e]; ++i, ++row) {
      std::vector<double> xr(x.begin() + row * kHidden, x.begin() + (row + 1) * kHidden);
      if (fp8) quantize_row(xr);
      std::vector<double> act(kInter);
      for (int64_t c = 0; c < kInter; ++c) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < kHidden; ++k) {
          const double s = fp8 ? gu_scale[e] : 1.0;
          g += xr[k] * gu[(e * kHidden + k) * 2 * kInter + c] * s;
          u += xr[k] * gu[(e * kHidden + k) * 2 * kInter + kInter + c] * s;
        }
        act[c] = g / (1 + std::exp(-g)) * u;
        if (!fp8) act[c] = round_bf16(static_cast<float>(act[c]));
      }
      if (fp8) quantize_row(act);
      for (int64_t c = 0; c < kHidden; ++c) {
        double acc = 0;
        for (int64_t k = 0; k < kInter; ++k) {
          acc += act[k] * down[(e * kInter + k) * kHidden + c] * (fp8 ? down_scale[e] : 1.0);
        }
        out[row * kHidden + c] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

void check_ffn(DType weight_dtype) {
  auto backend = cpu::make_cpu_backend({});
  testing::TensorPool pool(*backend);
  const std::vector<int64_t> counts = {3, 0, 5, 1};
  const int64_t experts = 4, rows = 9;
  const bool fp8 = weight_dtype == DType::kFP8E4M3;
  FfnWeights w{experts, kHidden, kInter, {}, {}, {}, {}};
  w.gate_up = pool.random(weight_dtype, {experts, kHidden, 2 * kInter}, fp8 ? 400.0f : 0.5f);
  w.down = pool.random(weight_dtype, {experts, kInter, kHidden}, fp8 ? 400.0f : 0.5f);
  if (fp8) {
    w.gate_up_scale = pool.from(DType::kF32, {experts}, {1e-3f, 2e-3f, 1.5e-3f, 1e-3f});
    w.down_scale = pool.from(DType::kF32, {experts}, {2e-3f, 1e-3f, 1e-3f, 3e-3f});
  }
  const Tensor x = pool.random(DType::kBF16, {rows, kHidden});
  const Tensor out = pool.zeros(DType::kF32, {rows, kHidden});
  cpu::expert_ffn(x, counts, w, out);
  const std::vector<float> expected =
      loop_ffn(pool.read(x), counts, pool.read(w.gate_up), pool.read(w.down),
               fp8 ? pool.read(w.gate_up_scale) : std::vector<float>(experts, 1.0f),
               fp8 ? pool.read(w.down_scale) : std::vector<float>(experts, 1.0f), fp8);
  // Only accumulation order differs, except where it flips a rounding of the activation.
  EXPECT_LT(testing::max_rel_diff(pool.read(out), expected), fp8 ? 3e-2 : 1e-2);
  EXPECT_GT(testing::max_rel_diff(expected, std::vector<float>(expected.size(), 0.0f)), 1e-4);
}

TEST(ExpertFfn, GroupedBf16EqualsPerExpertLoops) { check_ffn(DType::kBF16); }
TEST(ExpertFfn, GroupedFp8EqualsPerExpertLoops) { check_ffn(DType::kFP8E4M3); }

TEST(ExpertFfn, Fp8DiffersFromBf16ByQuantisationOnly) {
  // The same real weights in FP8 and BF16 give results within FP8 quantisation error.
  auto backend = cpu::make_cpu_backend({});
  testing::TensorPool pool(*backend);
  const int64_t rows = 4;
  const Tensor gu16 = pool.random(DType::kBF16, {1, kHidden, 2 * kInter}, 0.5f);
  const Tensor d16 = pool.random(DType::kBF16, {1, kInter, kHidden}, 0.5f);
  std::vector<float> gu = pool.read(gu16), d = pool.read(d16);
  for (float& v : gu) v *= 448.0f / 0.5f;
  for (float& v : d) v *= 448.0f / 0.5f;
  FfnWeights w16{1, kHidden, kInter, gu16, d16, {}, {}};
  FfnWeights w8{1,
                kHidden,
                kInter,
                pool.from(DType::kFP8E4M3, {1, kHidden, 2 * kInter}, gu),
                pool.from(DType::kFP8E4M3, {1, kInter, kHidden}, d),
                pool.from(DType::kF32, {1}, {0.5f / 448.0f}),
                pool.from(DType::kF32, {1}, {0.5f / 448.0f})};
  const Tensor x = pool.random(DType::kBF16, {rows, kHidden});
  const Tensor out16 = pool.zeros(DType::kF32, {rows, kHidden});
  const Tensor out8 = pool.zeros(DType::kF32, {rows, kHidden});
  cpu::expert_ffn(x, {rows}, w16, out16);
  cpu::expert_ffn(x, {rows}, w8, out8);
  const double diff = testing::max_rel_diff(pool.read(out8), pool.read(out16));
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 0.25);
}

}  // namespace
}  // namespace moesim::engine
