// RMSNorm and RoPE references against direct formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "../test_util.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine {
namespace {

TEST(RmsNorm, MatchesTheFormulaAndRoundsToBf16) {
  auto backend = cpu::make_cpu_backend({});
  testing::TensorPool pool(*backend);
  const int64_t rows = 3, hidden = 10;
  const Tensor x = pool.random(DType::kBF16, {rows, hidden}, 2.0f);
  const Tensor w = pool.random(DType::kBF16, {hidden}, 1.0f);
  const Tensor out = pool.zeros(DType::kBF16, {rows, hidden});
  backend->rmsnorm(x, w, 1e-5f, out);
  const std::vector<float> xs = pool.read(x), ws = pool.read(w), got = pool.read(out);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < hidden; ++c) ss += xs[r * hidden + c] * xs[r * hidden + c];
    const double inv = 1.0 / std::sqrt(ss / hidden + 1e-5);
    for (int64_t c = 0; c < hidden; ++c) {
      const float expected = static_cast<float>(xs[r * hidden + c] * inv * ws[c]);
      EXPECT_EQ(got[r * hidden + c], round_bf16(got[r * hidden + c]));
      EXPECT_NEAR(got[r * hidden + c], expected, std::fabs(expected) * 1e-2 + 1e-6);
    }
  }
}

TEST(Rope, RotatesPairsByPositionAndPreservesNorm) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  cpu::apply_rope(v.data(), 6, 0);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 4, 5, 6}));  // position 0: identity
  cpu::apply_rope(v.data(), 6, 7);
  // Pair (0, 3) at frequency 1: angle 7.
  EXPECT_NEAR(v[0], 1 * std::cos(7.0) - 4 * std::sin(7.0), 1e-5);
  EXPECT_NEAR(v[3], 1 * std::sin(7.0) + 4 * std::cos(7.0), 1e-5);
  // Pair (2, 5) at frequency 10000^(-4/6).
  const double a = 7 * std::pow(10000.0, -4.0 / 6);
  EXPECT_NEAR(v[2], 3 * std::cos(a) - 6 * std::sin(a), 1e-5);
  double norm = 0;
  for (float x : v) norm += x * x;
  EXPECT_NEAR(norm, 91.0, 1e-3);
}

}  // namespace
}  // namespace moesim::engine
