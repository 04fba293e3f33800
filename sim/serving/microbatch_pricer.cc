#include "sim/serving/microbatch_pricer.h"

#include <algorithm>
#include <span>
#include <utility>

#include "sim/cost/op_formulas.h"

namespace moesim::sim {

MicrobatchPricer::MicrobatchPricer(const MicrobatchSchedule& schedule, const ModelCard& card,
                                   const AttentionPricer& attention, ExpertPricer& experts,
                                   int32_t num_gpus, const SmSharing& sm)
    : schedule_(schedule), sm_(sm), card_(card), attention_(attention), experts_(experts) {
  const auto n = static_cast<size_t>(num_gpus);
  const auto num_classes = static_cast<size_t>(attention_.num_classes());
  for (int mb = 0; mb < 2; ++mb) {
    mb_gpu_tokens_[mb].assign(n, 0);
    mb_attn_s_[mb].assign(n * num_classes, 0);
    mb_attn_prep_share_[mb].assign(n * num_classes, 0);
  }
  totals_.compute_s.assign(n, 0);
  totals_.comm_s.assign(n, 0);
  totals_.wait_s.assign(n, 0);
}

void MicrobatchPricer::split(const std::vector<std::vector<SeqSlice>>& ranks,
                             const StepState& state) {
  const int32_t num_classes = attention_.num_classes();
  const bool prep = schedule_.has(StageOp::kAttentionPrep);
  const int32_t tp = state.tp;
  for (int mb = 0; mb < 2; ++mb) {
    mb_ranks_[mb].resize(static_cast<size_t>(state.num_ranks()));
    for (auto& r : mb_ranks_[mb]) r.clear();
  }
  for (int32_t r = 0; r < state.num_ranks(); ++r) {
    const int64_t target = (state.rank_tokens[r] + 1) / 2;
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
        const double s = attention_.seconds(c, slices, tokens);
        // ATTN-0 of the decode pipeline: the projections' share of the attention FLOPs.
        double share = 0;
        if (prep && tokens > 0) {
          const AttentionWork w =
              attention_work(attention_.spec(c), card_.hidden_size, card_.precision, tp, slices);
          const double total = w.prefill.flops + w.decode.flops;
          const double proj = static_cast<double>(tokens) *
                              attention_projection_flops(attention_.spec(c), card_.hidden_size) /
                              static_cast<double>(tp);
          share = total > 0 ? std::min(1.0, proj / total) : 0.0;
        }
        for (int32_t j = 0; j < tp; ++j) {
          const size_t at = static_cast<size_t>(r * tp + j) * num_classes + c;
          mb_attn_s_[mb][at] = s;
          mb_attn_prep_share_[mb][at] = share;
        }
      }
      // The rank's micro-batch tokens over its GPUs as price_step() splits the whole;
      // micro-batch 1 takes the rest of each GPU's tokens.
      for (int32_t j = 0; j < tp; ++j) {
        const int32_t g = r * tp + j;
        mb_gpu_tokens_[mb][g] = mb == 0 ? tokens / tp + (j < tokens % tp ? 1 : 0)
                                        : state.gpu_tokens[g] - mb_gpu_tokens_[0][g];
      }
    }
  }
}

CollectiveTimes MicrobatchPricer::price_layer(const MoeLayerCall& call, MoeLayerModel& model,
                                              StepState& state) {
  const int32_t n = state.num_gpus;
  const auto num_classes = static_cast<size_t>(attention_.num_classes());
  const int32_t attn_class = attention_.class_of_layer(call.layer_idx);
  const MoeSpec& m = *call.moe;
  if (region_.size() <= region_size_) region_.emplace_back();
  LayerStageCosts& costs = region_[region_size_++];
  costs.reset(call.layer_idx, n);
  const bool prep = schedule_.has(StageOp::kAttentionPrep);
  model.begin_microbatches();
  int64_t whole_tokens = 0, mb0_tokens = 0;
  for (int32_t g = 0; g < n; ++g) {
    whole_tokens += state.gpu_tokens[g];
    mb0_tokens += mb_gpu_tokens_[0][g];
  }
  CollectiveTimes total;
  for (int32_t mb = 0; mb < 2; ++mb) {
    for (int32_t g = 0; g < n; ++g) {
      const size_t at = static_cast<size_t>(g) * num_classes + attn_class;
      const double attn = mb_attn_s_[mb][at];
      const double attn_prep = prep ? attn * mb_attn_prep_share_[mb][at] : 0.0;
      costs.compute(mb, StageOp::kAttentionPrep, g) = attn_prep;
      costs.compute(mb, StageOp::kAttention, g) = attn - attn_prep;
      const int64_t t = mb_gpu_tokens_[mb][g];
      if (t > 0) costs.compute(mb, StageOp::kRouter, g) = experts_.router_seconds(m, t);
    }
    // This micro-batch's share of the layer's selections, then its tokens per GPU.
    model.split_microbatch(mb, state.gpu_tokens, mb_gpu_tokens_[0], whole_tokens, mb0_tokens);
    std::swap(state.gpu_tokens, mb_gpu_tokens_[mb]);
    ++state.tokens_version;
    const CollectiveTimes t = model.time_microbatch(mb, m, state);
    total.dispatch_bytes += t.dispatch_bytes;
    total.combine_bytes += t.combine_bytes;
    experts_.price(m, model.selections(), state.gpu_tokens, {.split_parts = true});
    for (int32_t g = 0; g < n; ++g) {
      costs.compute(mb, StageOp::kExperts, g) = experts_.routed_s()[g];
      costs.compute(mb, StageOp::kSharedExperts, g) = experts_.shared_s()[g];
    }
    costs.comm(mb, StageOp::kDispatch) = t.dispatch_s;
    costs.comm(mb, StageOp::kCombine) = t.combine_s;
    std::swap(state.gpu_tokens, mb_gpu_tokens_[mb]);
    ++state.tokens_version;
  }
  model.end_microbatches(call, total, state);
  return total;
}

void MicrobatchPricer::flush(StepState& state, StepObserver* observer) {
  if (region_size_ == 0) return;
  for (std::vector<double>* v : {&totals_.compute_s, &totals_.comm_s, &totals_.wait_s}) {
    std::fill(v->begin(), v->end(), 0.0);
  }
  spans_.clear();
  run_microbatch_timeline(schedule_, std::span<const LayerStageCosts>(region_.data(), region_size_),
                          sm_, state.clock_s, totals_, observer ? &spans_ : nullptr);
  region_size_ = 0;
  for (int32_t g = 0; g < state.num_gpus; ++g) {
    state.compute_s[g] += totals_.compute_s[g];
    state.comm_s[g] += totals_.comm_s[g];
    state.wait_s[g] += totals_.wait_s[g];
  }
  for (const TimelineSpan& sp : spans_) {
    trace_span(observer, sp.gpu, stage_span_name(sp.op, sp.mb), sp.layer_idx, sp.start_s,
               sp.duration_s, sp.sm_lost_s);
  }
}

}  // namespace moesim::sim
