#include "sim/serving/expert_pricer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"
#include "sim/cost/op_formulas.h"

namespace moesim::sim {
namespace {

const MoeSpec* first_moe_spec(const ModelCard& card) {
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe) return &l.ffn.moe;
  }
  return nullptr;
}

}  // namespace

std::shared_ptr<ExpertMemoTable> ExpertMemoTable::make(const ModelCard& card,
                                                       const CostModel& cost) {
  if (cost.counts_queries() || !first_moe_spec(card)) return nullptr;
  auto table = std::make_shared<ExpertMemoTable>();
  table->card = &card;
  table->cost = &cost;
  table->entries.assign(kSize, Entry{});
  return table;
}

ExpertPricer::ExpertPricer(const ModelCard& card, const CostModel& cost, int32_t num_gpus,
                           std::shared_ptr<ExpertMemoTable> memo)
    : card_(card), cost_(cost), moe_(first_moe_spec(card)) {
  const auto n = static_cast<size_t>(num_gpus);
  memo_allowed_ = !cost_.counts_queries();
  if (memo_allowed_) token_ops_memo_.assign(n, TokenOpsMemo{});
  if (memo) {
    MOESIM_CHECK(memo_allowed_ && memo->card == &card_ && memo->cost == &cost_ &&
                     memo->entries.size() == ExpertMemoTable::kSize,
                 "an expert memo shared between models of different cards or cost models");
    memo_ = std::move(memo);
  } else if (memo_allowed_ && moe_) {
    memo_ = ExpertMemoTable::make(card_, cost_);
  }
  if (memo_) memo_entries_ = memo_->entries.data();
  experts_per_gpu_.assign(n, -1);  // -1: not seen yet
  log1p_inv_experts_.assign(n, 0);
  ffn_s_.assign(n, 0);
  routed_s_.assign(n, 0);
  shared_s_.assign(n, 0);
}

double ExpertPricer::router_seconds(const MoeSpec& m, int64_t tokens) const {
  const int64_t hidden = card_.hidden_size;
  return cost_.checked_seconds(router_work(m, hidden, tokens, card_.precision.shared_experts)) +
         cost_.checked_seconds(permute_work(tokens, m.top_k, hidden));
}

const ExpertPricer::TokenOpsMemo& ExpertPricer::refresh_token_ops(int32_t g, int64_t tokens,
                                                                  const MoeSpec& m) {
  TokenOpsMemo& memo = token_ops_memo_[g];
  // Priced as router_seconds() and price() price them without the memo (tokens > 0).
  const int64_t hidden = card_.hidden_size;
  const bool has_shared = m.num_shared_experts > 0;
  const double router =
      cost_.checked_seconds(router_work(m, hidden, tokens, card_.precision.shared_experts));
  const double permute = cost_.checked_seconds(permute_work(tokens, m.top_k, hidden));
  memo.shared = has_shared ? cost_.checked_seconds(shared_expert_work(
                                 m, hidden, tokens, card_.precision.shared_experts))
                           : 0.0;
  memo.combine = cost_.checked_seconds(combine_work(tokens, m.top_k, has_shared, hidden));
  memo.router_permute = router + permute;
  memo.tokens = tokens;
  return memo;
}

double ExpertPricer::price_expert_seconds(int64_t selections, int32_t slots,
                                          double log1p_inv_slots) {
  const double active =
      expected_active_experts(static_cast<double>(selections), slots, log1p_inv_slots);
  return cost_.checked_seconds(expert_ffn_work(*moe_, card_.hidden_size,
                                               card_.precision.routed_experts, selections, active));
}

void ExpertPricer::refresh_slots(const LayerPlacements& placements, int32_t moe_layer_idx) {
  const uint64_t version = placements.version(moe_layer_idx);
  if (version == slots_version_) return;
  slots_version_ = version;
  const ExpertPlacement& placement = placements.layer(moe_layer_idx);
  for (size_t g = 0; g < experts_per_gpu_.size(); ++g) {
    const int32_t slots = placement.num_slots(static_cast<int32_t>(g));
    if (slots == experts_per_gpu_[g]) continue;
    experts_per_gpu_[g] = slots;
    log1p_inv_experts_[g] = std::log1p(-1.0 / static_cast<double>(slots));
  }
}

void ExpertPricer::price(const MoeSpec& m, std::span<const int64_t> selections,
                         std::span<const int64_t> gpu_tokens, const Extras& extras) {
  // Routed and shared experts and the combine on every GPU. Routed experts take the first MoE
  // layer's shape (moe_), the one the placement holds.
  const auto n = static_cast<int32_t>(ffn_s_.size());
  const int64_t hidden = card_.hidden_size;
  const bool has_shared = m.num_shared_experts > 0;
  if (memo_allowed_) use_spec(m);
  double max_sel = 0, sum_sel = 0, max_ffn = 0;
  for (int32_t g = 0; g < n; ++g) {
    const double sel = static_cast<double>(selections[g]);
    if (extras.reach) (*extras.reach_out)[g] = extras.reach->of(sel, extras.reach_tokens);
    max_sel = std::max(max_sel, sel);
    sum_sel += sel;
    const double e =
        sel > 0 ? expert_seconds(selections[g], experts_per_gpu_[g], log1p_inv_experts_[g]) : 0.0;
    const int64_t t = gpu_tokens[g];
    double sh = 0, cmb = 0;
    if (t > 0 && memo_allowed_) {
      const TokenOpsMemo& ops = token_ops(g, t, m);
      sh = ops.shared;
      cmb = ops.combine;
    } else if (t > 0) {
      if (has_shared) {
        sh =
            cost_.checked_seconds(shared_expert_work(m, hidden, t, card_.precision.shared_experts));
      }
      cmb = cost_.checked_seconds(combine_work(t, m.top_k, has_shared, hidden));
    }
    ffn_s_[g] = e + sh + cmb;
    max_ffn = std::max(max_ffn, ffn_s_[g]);
    if (extras.split_parts) {
      routed_s_[g] = e + cmb;
      shared_s_[g] = sh;
    }
  }
  max_ffn_s_ = max_ffn;
  StepTotals* result = extras.balance;
  if (!result) return;
  result->max_gpu_selections += max_sel;
  result->mean_gpu_selections += sum_sel / n;
  if (max_sel > 0) {
    const double mean_sel = sum_sel / n;
    result->gpu_imbalance_sum += (max_sel - mean_sel) / mean_sel;
    result->gpu_balancedness_sum += mean_sel / max_sel;
    result->num_gpu_balance_layers++;
  }
}

}  // namespace moesim::sim
