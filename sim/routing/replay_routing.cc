#include "sim/routing/replay_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

void check_field(const RoutingTrace& trace, const char* field, int64_t got, int64_t expected) {
  if (got != expected) {
    throw ConfigError(
        trace.file, 1, 0, field,
        "trace has " + std::to_string(got) + ", the scenario needs " + std::to_string(expected));
  }
}

}  // namespace

ReplayRoutingModel::ReplayRoutingModel(RoutingTrace trace, const RoutingShape& shape,
                                       int32_t num_src_gpus)
    : trace_(std::move(trace)), shape_(shape) {
  check_field(trace_, "num_moe_layers", trace_.header.num_moe_layers, shape.num_moe_layers);
  check_field(trace_, "num_experts", trace_.header.num_experts, shape.num_experts);
  check_field(trace_, "top_k", trace_.header.top_k, shape.top_k);
  check_field(trace_, "num_src_gpus", trace_.header.num_src_gpus, num_src_gpus);
  MOESIM_CHECK(trace_.num_steps > 0, "a trace has steps");
}

void ReplayRoutingModel::route(const RoutingQuery& query, CountMatrix& out) {
  MOESIM_CHECK(query.tokens_per_src.size() == static_cast<size_t>(trace_.header.num_src_gpus),
               "replay needs the trace's number of sources");
  MOESIM_CHECK(query.moe_layer_idx >= 0 && query.moe_layer_idx < shape_.num_moe_layers,
               "layer range");
  MOESIM_CHECK(query.step_idx >= 0, "step must be >= 0");
  const CountMatrix& rec = trace_.at(query.step_idx % trace_.num_steps, query.moe_layer_idx);
  const int32_t num_src = rec.num_rows();
  out.reset(num_src, shape_.num_experts);
  bool totals_ready = false;
  for (int32_t s = 0; s < num_src; ++s) {
    const int32_t tokens = query.tokens_per_src[s];
    MOESIM_CHECK(tokens >= 0, "token counts must be >= 0");
    const int64_t recorded_tokens = rec.row_sum(s) / shape_.top_k;
    if (recorded_tokens == tokens) {
      std::copy(rec.row(s).begin(), rec.row(s).end(), out.row(s).begin());
      continue;
    }
    if (recorded_tokens == 0 && !totals_ready) {
      layer_totals_.resize(shape_.num_experts);
      rec.col_sums(layer_totals_);
      totals_ready = true;
    }
    rescale_row(rec.row(s), recorded_tokens, tokens, out.row(s));
  }
}

std::span<const double> ReplayRoutingModel::expected_shares(int32_t moe_layer_idx,
                                                            int64_t step_idx) {
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < shape_.num_moe_layers, "layer range");
  MOESIM_CHECK(step_idx >= 0, "step must be >= 0");
  const CountMatrix& rec = trace_.at(step_idx % trace_.num_steps, moe_layer_idx);
  layer_totals_.resize(shape_.num_experts);
  rec.col_sums(layer_totals_);
  int64_t selections = 0;
  for (int64_t c : layer_totals_) selections += c;
  const double tokens = static_cast<double>(selections / shape_.top_k);
  shares_.assign(shape_.num_experts, 0.0);
  if (tokens > 0) {
    for (int32_t e = 0; e < shape_.num_experts; ++e) {
      shares_[e] = static_cast<double>(layer_totals_[e]) / tokens;
    }
  }
  return shares_;
}

void ReplayRoutingModel::rescale_row(std::span<const int32_t> recorded, int64_t recorded_tokens,
                                     int32_t tokens, std::span<int32_t> out) {
  const int32_t num_experts = shape_.num_experts;
  const int64_t target = static_cast<int64_t>(tokens) * shape_.top_k;
  if (target == 0) return;
  weights_.resize(num_experts);
  exact_.resize(num_experts);
  double weight_sum = 0.0;
  for (int32_t e = 0; e < num_experts; ++e) {
    weights_[e] = recorded_tokens > 0 ? recorded[e] : static_cast<double>(layer_totals_[e]);
    weight_sum += weights_[e];
  }
  if (weight_sum == 0.0) {
    std::fill(weights_.begin(), weights_.end(), 1.0);
    weight_sum = num_experts;
  }
  // Proportional shares capped at `tokens` per expert: cap, rescale the rest, until none exceeds.
  std::fill(exact_.begin(), exact_.end(), -1.0);
  double open_weight = weight_sum;
  double open_target = static_cast<double>(target);
  bool changed = true;
  while (changed) {
    changed = false;
    for (int32_t e = 0; e < num_experts; ++e) {
      if (exact_[e] >= 0.0 || weights_[e] == 0.0) continue;
      if (weights_[e] * open_target / open_weight > tokens) {
        exact_[e] = tokens;
        open_weight -= weights_[e];
        open_target -= tokens;
        changed = true;
      }
    }
  }
  for (int32_t e = 0; e < num_experts; ++e) {
    if (exact_[e] < 0.0)
      exact_[e] = open_weight > 0.0 ? weights_[e] * open_target / open_weight : 0;
  }
  int64_t assigned = 0;
  for (int32_t e = 0; e < num_experts; ++e) {
    out[e] = static_cast<int32_t>(std::floor(exact_[e]));
    assigned += out[e];
  }
  order_.resize(num_experts);
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    return exact_[a] - std::floor(exact_[a]) > exact_[b] - std::floor(exact_[b]);
  });
  for (int32_t i = 0; assigned < target; i = (i + 1) % num_experts) {
    const int32_t e = order_[i];
    if (out[e] < tokens) {
      ++out[e];
      ++assigned;
    }
  }
}

}  // namespace moesim::sim
