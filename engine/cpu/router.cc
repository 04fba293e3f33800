// Router reference: FP32 logits, softmax or sigmoid scoring, top-k (see RouterConfig).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "engine/cpu/host_matrix.h"
#include "engine/cpu/reference.h"

namespace moesim::engine::cpu {

void router(const Tensor& x, const RouterWeights& w, const RouterConfig& config,
            const Tensor& expert_ids, const Tensor& expert_weights) {
  const int64_t num_tokens = x.rows();
  const int64_t num_experts = config.num_experts;
  const int64_t top_k = config.top_k;
  MOESIM_CHECK(top_k >= 1 && top_k <= num_experts, "router: top_k out of range");
  MOESIM_CHECK(w.w_gate.rows() == x.cols() && w.w_gate.cols() == num_experts, "router: gate shape");
  MOESIM_CHECK(expert_ids.dtype == DType::kI32 && expert_ids.rows() == num_tokens &&
                   expert_ids.cols() == top_k,
               "router: expert_ids shape");
  MOESIM_CHECK(expert_weights.dtype == DType::kF32 && expert_weights.shape == expert_ids.shape,
               "router: expert_weights shape");
  const MatF logits = load_matrix(x) * load_matrix(w.w_gate);
  const bool has_bias = !w.bias.empty();
  const VecF bias = has_bias ? load_vector(w.bias) : VecF::Zero(num_experts);
  int32_t* ids = static_cast<int32_t*>(expert_ids.data);
  float* weights = static_cast<float*>(expert_weights.data);
  std::vector<float> score(num_experts);
  std::vector<float> key(num_experts);
  std::vector<int32_t> order(num_experts);
  for (int64_t t = 0; t < num_tokens; ++t) {
    if (config.scoring == ScoringFunc::kSoftmax) {
      const float max_logit = logits.row(t).maxCoeff();
      float sum = 0.0f;
      for (int64_t e = 0; e < num_experts; ++e) {
        score[e] = std::exp(logits(t, e) - max_logit);
        sum += score[e];
      }
      for (int64_t e = 0; e < num_experts; ++e) {
        score[e] /= sum;
        key[e] = score[e];
      }
    } else {
      for (int64_t e = 0; e < num_experts; ++e) {
        score[e] = 1.0f / (1.0f + std::exp(-logits(t, e)));
        key[e] = score[e] + bias[e];
      }
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return key[a] > key[b] || (key[a] == key[b] && a < b);
    });
    float picked_sum = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) picked_sum += score[order[j]];
    for (int64_t j = 0; j < top_k; ++j) {
      const float weight = config.normalize_top_k ? score[order[j]] / picked_sum : score[order[j]];
      ids[t * top_k + j] = order[j];
      weights[t * top_k + j] = weight * config.routed_scaling;
    }
  }
}

}  // namespace moesim::engine::cpu
