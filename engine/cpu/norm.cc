// RMSNorm, RoPE and causal softmax attention: the building blocks of the attention references.
#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "engine/cpu/attend.h"
#include "engine/cpu/reference.h"

namespace moesim::engine::cpu {

void rmsnorm_rows(MatF& m, const VecF& w, float eps) {
  MOESIM_CHECK(w.size() == m.cols(), "rmsnorm weight size");
  for (int64_t r = 0; r < m.rows(); ++r) {
    const float mean_sq = m.row(r).squaredNorm() / static_cast<float>(m.cols());
    const float inv = 1.0f / std::sqrt(mean_sq + eps);
    m.row(r) = (m.row(r).array() * inv * w.transpose().array()).matrix();
  }
}

void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  MOESIM_CHECK(x.shape == out.shape, "rmsnorm: x and out shapes differ");
  MOESIM_CHECK(weight.num_elements() == x.cols(), "rmsnorm: weight size");
  MatF m = load_matrix(x);
  rmsnorm_rows(m, load_vector(weight), eps);
  store_matrix(m, out);
}

void apply_rope(float* v, int64_t dim, int64_t pos) {
  MOESIM_CHECK(dim % 2 == 0, "rope dimension must be even");
  const int64_t half = dim / 2;
  for (int64_t j = 0; j < half; ++j) {
    const double inv_freq = std::pow(10000.0, -2.0 * static_cast<double>(j) / dim);
    const double angle = static_cast<double>(pos) * inv_freq;
    const float c = static_cast<float>(std::cos(angle));
    const float s = static_cast<float>(std::sin(angle));
    const float a = v[j];
    const float b = v[j + half];
    v[j] = a * c - b * s;
    v[j + half] = a * s + b * c;
  }
}

MatF attend_causal(const MatF& q, const MatF& k, const MatF& v, float scale, int64_t context) {
  const int64_t n = q.rows();
  MOESIM_CHECK(k.rows() == context + n && v.rows() == k.rows(), "attend key count");
  MOESIM_CHECK(q.cols() == k.cols(), "attend q/k width");
  MatF scores = (q * k.transpose()) * scale;  // [n, m]
  MatF out(n, v.cols());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t visible = context + i + 1;
    auto row = scores.row(i).head(visible);
    const float max_score = row.maxCoeff();
    Eigen::RowVectorXf p = (row.array() - max_score).exp().matrix();
    p /= p.sum();
    out.row(i) = p * v.topRows(visible);
  }
  return out;
}

}  // namespace moesim::engine::cpu
