// StepModel under a micro-batch timeline ([deployment] overlap = "two_microbatch" or
// "decode_pipeline"; docs/serving.md, "Overlap schedules"): the split of each rank's slices into
// two micro-batches and the per-micro-batch stage costs of a MoE layer. The timeline itself is
// sim/serving/layer_timeline.h, run by StepModel::flush_microbatch_region (step_model.cc).
//
// Split: each rank's slices in order fill micro-batch 0 up to ceil(T / 2) of the rank's T new
// tokens; a prefill chunk crossing that mark is cut in two (its second part attends to the first
// as cached context: DeepSeek's prefill "may split the same prompt between" the micro-batches),
// decode slices stay whole. The layer's routing is drawn once for the whole batch (as without
// overlap: a recorded routing replays unchanged) and each micro-batch gets its sources' share of
// every (source, destination) count (micro-batch 0: round(count x T0_s / T_s), micro-batch 1 the
// rest); on the fast tier the destinations' totals split by the micro-batches' token shares.
// Each micro-batch's collectives then run on its own traffic, and its experts are priced from its
// own selections (an expert hit by both reads its weights twice).
#include <algorithm>
#include <cmath>

#include "sim/cost/op_formulas.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {

void StepModel::split_microbatches(const std::vector<std::vector<SeqSlice>>& ranks) {
  const int32_t num_classes = static_cast<int32_t>(attn_classes_.size());
  const bool prep = schedule_->has(StageOp::kAttentionPrep);
  for (int mb = 0; mb < 2; ++mb) {
    mb_ranks_[mb].resize(static_cast<size_t>(num_ranks()));
    for (auto& r : mb_ranks_[mb]) r.clear();
  }
  for (int32_t r = 0; r < num_ranks(); ++r) {
    const int64_t target = (rank_tokens_[r] + 1) / 2;
    int64_t acc = 0;
    for (const SeqSlice& sl : ranks[r]) {
      if (acc >= target) {
        mb_ranks_[1][r].push_back(sl);
      } else if (sl.prefill && acc + sl.new_tokens > target) {
        const int64_t first = target - acc;
        mb_ranks_[0][r].push_back(SeqSlice{first, sl.context_tokens, true});
        mb_ranks_[1][r].push_back(SeqSlice{sl.new_tokens - first, sl.context_tokens + first, true});
        acc = target;
      } else {
        mb_ranks_[0][r].push_back(sl);
        acc += sl.new_tokens;
      }
    }
    for (int mb = 0; mb < 2; ++mb) {
      const std::vector<SeqSlice>& slices = mb_ranks_[mb][r];
      int64_t tokens = 0;
      for (const SeqSlice& sl : slices) tokens += sl.new_tokens;
      for (int32_t c = 0; c < num_classes; ++c) {
        const double s = attention_seconds(c, slices, tokens);
        // ATTN-0 of the decode pipeline: the projections' share of the attention FLOPs.
        double share = 0;
        if (prep && tokens > 0) {
          const AttentionWork w =
              attention_work(attn_classes_[c], card_.hidden_size, card_.precision, tp_, slices);
          const double total = w.prefill.flops + w.decode.flops;
          const double proj = static_cast<double>(tokens) *
                              attention_projection_flops(attn_classes_[c], card_.hidden_size) /
                              static_cast<double>(tp_);
          share = total > 0 ? std::min(1.0, proj / total) : 0.0;
        }
        for (int32_t j = 0; j < tp_; ++j) {
          const size_t at = static_cast<size_t>(r * tp_ + j) * num_classes + c;
          mb_attn_s_[mb][at] = s;
          mb_attn_prep_share_[mb][at] = share;
        }
      }
      // The rank's micro-batch tokens over its GPUs as price_attention splits the whole;
      // micro-batch 1 takes the rest of each GPU's tokens.
      for (int32_t j = 0; j < tp_; ++j) {
        const int32_t g = r * tp_ + j;
        mb_gpu_tokens_[mb][g] = mb == 0 ? tokens / tp_ + (j < tokens % tp_ ? 1 : 0)
                                        : gpu_tokens_[g] - mb_gpu_tokens_[0][g];
      }
    }
  }
}

void StepModel::price_microbatch_layer(int32_t layer_idx, const MoeSpec& m, bool fast,
                                       double& dispatch_bytes, double& combine_bytes) {
  const int32_t n = num_gpus();
  const auto num_classes = static_cast<size_t>(attn_classes_.size());
  const LayerInfo& info = layers_[layer_idx];
  const ExpertPlacement& placement = placements_->layer(info.moe_idx);
  if (region_.size() <= region_size_) region_.emplace_back();
  LayerStageCosts& costs = region_[region_size_++];
  costs.reset(layer_idx, n);
  const bool prep = schedule_->has(StageOp::kAttentionPrep);
  const int64_t hidden = card_.hidden_size;
  whole_dst_selections_.assign(dst_selections_.begin(), dst_selections_.end());
  int64_t whole_tokens = 0, mb0_tokens = 0;
  for (int32_t g = 0; g < n; ++g) {
    whole_tokens += gpu_tokens_[g];
    mb0_tokens += mb_gpu_tokens_[0][g];
  }
  dispatch_bytes = 0;
  combine_bytes = 0;
  for (int32_t mb = 0; mb < 2; ++mb) {
    for (int32_t g = 0; g < n; ++g) {
      const size_t at = static_cast<size_t>(g) * num_classes + info.attn_class;
      const double attn = mb_attn_s_[mb][at];
      const double attn_prep = prep ? attn * mb_attn_prep_share_[mb][at] : 0.0;
      costs.compute(mb, StageOp::kAttentionPrep, g) = attn_prep;
      costs.compute(mb, StageOp::kAttention, g) = attn - attn_prep;
      const int64_t t = mb_gpu_tokens_[mb][g];
      if (t > 0) {
        costs.compute(mb, StageOp::kRouter, g) =
            cost_.checked_seconds(router_work(m, hidden, t, card_.precision.shared_experts)) +
            cost_.checked_seconds(permute_work(t, m.top_k, hidden));
      }
    }
    // This micro-batch's share of the layer's selections.
    if (fast) {
      for (int32_t d = 0; d < n; ++d) {
        const auto sel = static_cast<double>(whole_dst_selections_[d]);
        const int64_t sel0 = whole_tokens > 0 ? std::llround(sel * static_cast<double>(mb0_tokens) /
                                                             static_cast<double>(whole_tokens))
                                              : 0;
        dst_selections_[d] = mb == 0 ? sel0 : whole_dst_selections_[d] - sel0;
      }
    } else {
      mb_src_dst_.reset(n, n);
      for (int32_t s = 0; s < n; ++s) {
        const auto ts = static_cast<double>(gpu_tokens_[s]);
        const auto t0 = static_cast<double>(mb_gpu_tokens_[0][s]);
        for (int32_t d = 0; d < n; ++d) {
          const int32_t sel = src_dst_.at(s, d);
          const auto sel0 =
              ts > 0 ? static_cast<int32_t>(std::llround(static_cast<double>(sel) * t0 / ts)) : 0;
          mb_src_dst_.at(s, d) = mb == 0 ? sel0 : sel - sel0;
        }
      }
    }
    std::swap(gpu_tokens_, mb_gpu_tokens_[mb]);  // the micro-batch's tokens per GPU
    ++tokens_version_;
    double dispatch_s = 0, combine_s = 0;
    if (fast) {
      fill_fast_tokens();
      if (placement.has_replicas()) {
        fast_->load(fast_tokens_, fast_reach_, fast_remote_reach_);
      } else {
        fast_->load(fast_tokens_, fast_reach_);
      }
      const FastAllToAll::Seconds s = fast_->both_seconds(dispatch_row_bytes_, combine_row_bytes_);
      dispatch_s = to_seconds(collective_duration_ns(s.dispatch, topology_, {}));
      combine_s = to_seconds(collective_duration_ns(s.combine, topology_, {}));
      dispatch_bytes += fast_->total_tokens() * dispatch_row_bytes_;
      combine_bytes += fast_->total_tokens() * combine_row_bytes_;
    } else {
      std::swap(src_dst_, mb_src_dst_);
      token_counts_.tokens_per_src.assign(gpu_tokens_.begin(), gpu_tokens_.end());
      count_unique_tokens(m.top_k);
      plan_.build(topology_, token_counts_, deployment_.dispatch);
      plan_.dispatch_traffic(dispatch_row_bytes_, traffic_);
      if (background_ && mb == 0) add_background_traffic();
      network_->run(traffic_, collective_);
      if (track_nic_bytes_) add_exact_nic_bytes();
      dispatch_s = to_seconds(collective_.duration_ns);
      dispatch_bytes += traffic_.total_bytes();
      plan_.combine_traffic(combine_row_bytes_, traffic_);
      combine_bytes += traffic_.total_bytes();
      network_->run(traffic_, collective_);
      if (track_nic_bytes_) add_exact_nic_bytes();
      combine_s = to_seconds(collective_.duration_ns);
      std::swap(src_dst_, mb_src_dst_);
    }
    price_experts(m, /*record_balance=*/false);
    for (int32_t g = 0; g < n; ++g) {
      costs.compute(mb, StageOp::kExperts, g) = routed_s_[g];
      costs.compute(mb, StageOp::kSharedExperts, g) = shared_s_[g];
    }
    costs.comm(mb, StageOp::kDispatch) = dispatch_s;
    costs.comm(mb, StageOp::kCombine) = combine_s;
    std::swap(gpu_tokens_, mb_gpu_tokens_[mb]);
    ++tokens_version_;
  }
  token_counts_.tokens_per_src.assign(gpu_tokens_.begin(), gpu_tokens_.end());
  std::copy(whole_dst_selections_.begin(), whole_dst_selections_.end(), dst_selections_.begin());
}

}  // namespace moesim::sim
