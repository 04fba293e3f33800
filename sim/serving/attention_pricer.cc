#include "sim/serving/attention_pricer.h"

#include <algorithm>

#include "sim/cost/op_formulas.h"

namespace moesim::sim {

AttentionPricer::AttentionPricer(const ModelCard& card, const Topology& topology,
                                 const CostModel& cost, int32_t tp, int32_t num_gpus)
    : card_(card), topology_(topology), cost_(cost), tp_(tp) {
  for (const LayerSpec& l : card_.layers) {
    auto it = std::find(classes_.begin(), classes_.end(), l.attention);
    layer_class_.push_back(static_cast<int32_t>(it - classes_.begin()));
    if (it == classes_.end()) classes_.push_back(l.attention);
  }
  attn_s_.assign(static_cast<size_t>(num_gpus) * classes_.size(), 0);
}

double AttentionPricer::seconds(int32_t attn_class, std::span<const SeqSlice> seqs,
                                int64_t tokens) const {
  if (tokens == 0) return 0.0;
  const int64_t hidden = card_.hidden_size;
  const AttentionWork w = attention_work(classes_[attn_class], hidden, card_.precision, tp_, seqs);
  double s = 0;
  if (w.prefill.tokens > 0) s += cost_.checked_seconds(w.prefill);
  if (w.decode.tokens > 0) s += cost_.checked_seconds(w.decode);
  // Two RMSNorms per layer (before attention and before the FFN).
  s += 2.0 * cost_.checked_seconds(rmsnorm_work(tokens, hidden, card_.precision.attention));
  if (tp_ > 1) {
    // Ring all-reduce of the attention output over the TP group's NVLink.
    const double bw = topology_.nvlink_bytes_per_s_per_gpu();
    const double bytes = attention_allreduce_bytes(tokens, hidden, tp_);
    if (bw > 0) s += bytes / bw;
  }
  return s;
}

int64_t AttentionPricer::price_step(const std::vector<std::vector<SeqSlice>>& ranks,
                                    StepState& state) {
  const int32_t num_classes = this->num_classes();
  int64_t total_tokens = 0;
  for (int32_t r = 0; r < state.num_ranks(); ++r) {
    int64_t tokens = 0;
    for (const SeqSlice& s : ranks[r]) tokens += s.new_tokens;
    total_tokens += tokens;
    state.rank_tokens[r] = tokens;
    for (int32_t c = 0; c < num_classes; ++c) {
      const double s = seconds(c, ranks[r], tokens);
      for (int32_t j = 0; j < tp_; ++j) {
        attn_s_[static_cast<size_t>(r * tp_ + j) * num_classes + c] = s;
      }
    }
    for (int32_t j = 0; j < tp_; ++j) {
      // With TP attention the rank's tokens are split over its GPUs for the MoE part.
      const int64_t share = tokens / tp_ + (j < tokens % tp_ ? 1 : 0);
      state.gpu_tokens[r * tp_ + j] = share;
      state.src_tokens[r * tp_ + j] = static_cast<int32_t>(share);
    }
  }
  ++state.tokens_version;
  return total_tokens;
}

}  // namespace moesim::sim
