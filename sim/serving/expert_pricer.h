// Expert pricing of a MoE layer on every GPU: its routed experts (the selections it received,
// reading the weights of the experts they hit), its shared experts and the weighted combine sum,
// plus the router and permutation every MoE layer repeats alike. Memos keep what a step's layers
// repeat: the per-GPU token ops for the last (tokens, spec), and routed-expert seconds by
// (selections, slots) in a direct-mapped table that the models of one card share.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/metrics/step_totals.h"
#include "sim/model/model_card.h"
#include "sim/placement/layer_placements.h"
#include "sim/serving/unique_tokens.h"

namespace moesim::sim {

// Routed-expert seconds by (selections, slots) for one model card and cost model: a pure
// function of the two where the cost model does not count its queries, so the step models of
// one card and cost model may share one table (ReplicaBuilder does: one table warm in cache).
struct ExpertMemoTable {
  struct Entry {
    int64_t key = -1;  // selections << 16 | slots; -1: empty
    double seconds = 0;
  };
  static constexpr int kBits = 14;
  static constexpr size_t kSize = size_t{1} << kBits;
  const ModelCard* card = nullptr;
  const CostModel* cost = nullptr;
  std::vector<Entry> entries;
  // A table for `card` and `cost`; null where no memo applies (the cost model counts its
  // queries, or the card has no MoE layer).
  static std::shared_ptr<ExpertMemoTable> make(const ModelCard& card, const CostModel& cost);
};

class ExpertPricer {
 public:
  // The routed experts take the card's first MoE layer's shape (the one placements hold).
  // `memo`: a table of make(card, cost) to share (checked), or null for one of its own where a
  // memo applies. References must outlive the pricer.
  ExpertPricer(const ModelCard& card, const CostModel& cost, int32_t num_gpus,
               std::shared_ptr<ExpertMemoTable> memo);

  // The memo of routed-expert seconds (null when none applies).
  const std::shared_ptr<ExpertMemoTable>& memo() const { return memo_; }
  // Whether ops may be memoised (the cost model does not count its queries).
  bool memo_allowed() const { return memo_allowed_; }

  // Router gate and permutation seconds of `tokens` tokens of a layer of spec `m`.
  double router_seconds(const MoeSpec& m, int64_t tokens) const;
  // Makes the per-GPU memos those of layer spec `m` (dropping them all when it differs from the
  // last one); then memo_router_seconds() prices through them. memo_allowed() only.
  void use_spec(const MoeSpec& m) {
    if (token_ops_spec_ == m) return;
    token_ops_spec_ = m;
    for (TokenOpsMemo& memo : token_ops_memo_) memo.tokens = -1;
  }
  // router_seconds(spec, tokens) through GPU g's memo, for the spec of the last use_spec().
  double memo_router_seconds(int32_t g, int64_t tokens) {
    return token_ops(g, tokens, token_ops_spec_).router_permute;
  }

  // The slots per GPU of MoE layer `moe_layer_idx`'s placement (refreshed when its version
  // moved since the last call).
  void refresh_slots(const LayerPlacements& placements, int32_t moe_layer_idx);
  std::span<const int32_t> slots_per_gpu() const { return experts_per_gpu_; }

  // What price() does beyond the seconds.
  struct Extras {
    bool split_parts = false;          // fill routed_s() and shared_s() apart
    StepTotals* balance = nullptr;     // add the layer's per-GPU selection balance
    const FastReach* reach = nullptr;  // also each destination's reach from reach_tokens
    double reach_tokens = 0;
    std::vector<double>* reach_out = nullptr;  // sized num_gpus
  };
  // Routed + shared experts + combine seconds per GPU (ffn_s(), max_ffn_s()) for layer spec `m`
  // from each GPU's received `selections` and its own `gpu_tokens`, on the last refreshed slots.
  void price(const MoeSpec& m, std::span<const int64_t> selections,
             std::span<const int64_t> gpu_tokens, const Extras& extras);
  std::span<const double> ffn_s() const { return ffn_s_; }
  double max_ffn_s() const { return max_ffn_s_; }
  // With Extras::split_parts: routed experts + combine, and shared experts, per GPU.
  std::span<const double> routed_s() const { return routed_s_; }
  std::span<const double> shared_s() const { return shared_s_; }

 private:
  // Per GPU, the seconds of the ops every MoE layer of a step repeats alike (router,
  // permutation, shared experts, combine): they depend only on the GPU's tokens and the layer's
  // MoeSpec (the card's hidden size and precision are fixed), so they are kept for the last
  // (tokens, spec) and reused for equal ones.
  struct TokenOpsMemo {
    int64_t tokens = -1;  // -1: nothing kept
    double router_permute = 0, shared = 0, combine = 0;
  };
  const TokenOpsMemo& token_ops(int32_t g, int64_t tokens, const MoeSpec& m) {
    const TokenOpsMemo& memo = token_ops_memo_[g];
    return memo.tokens == tokens ? memo : refresh_token_ops(g, tokens, m);
  }
  const TokenOpsMemo& refresh_token_ops(int32_t g, int64_t tokens, const MoeSpec& m);
  double expert_seconds(int64_t selections, int32_t slots, double log1p_inv_slots) {
    // One key for both (slots < 2^16, selections < 2^47, else not kept); consecutive selections
    // take consecutive entries, as a step's GPUs draw counts close to each other.
    if (!memo_entries_ || slots >= (1 << 16) || selections >= (int64_t{1} << 47)) {
      return price_expert_seconds(selections, slots, log1p_inv_slots);
    }
    const auto key = static_cast<int64_t>((static_cast<uint64_t>(selections) << 16) |
                                          static_cast<uint64_t>(slots));
    ExpertMemoTable::Entry& e = memo_entries_[static_cast<size_t>(selections + 2053 * slots) &
                                              (ExpertMemoTable::kSize - 1)];
    if (e.key != key) {
      e.seconds = price_expert_seconds(selections, slots, log1p_inv_slots);
      e.key = key;
    }
    return e.seconds;
  }
  double price_expert_seconds(int64_t selections, int32_t slots, double log1p_inv_slots);

  const ModelCard& card_;
  const CostModel& cost_;
  const MoeSpec* moe_ = nullptr;  // the card's first MoE layer
  bool memo_allowed_ = false;     // !cost_.counts_queries(), asked once
  std::vector<TokenOpsMemo> token_ops_memo_;
  MoeSpec token_ops_spec_;
  std::shared_ptr<ExpertMemoTable> memo_;
  ExpertMemoTable::Entry* memo_entries_ = nullptr;  // memo_->entries.data(); null: no memo
  std::vector<int32_t> experts_per_gpu_;            // the placement's slots per GPU, as last seen
  std::vector<double> log1p_inv_experts_;           // log1p(-1 / experts_per_gpu_[g])
  uint64_t slots_version_ = 0;                      // the placement version refreshed from
  std::vector<double> ffn_s_, routed_s_, shared_s_;
  double max_ffn_s_ = 0;
};

}  // namespace moesim::sim
