// StepModel's draft passes of speculative decoding with the card's MTP modules
// (set_draft_tokens; docs/serving.md, "Speculative decoding"), or with a co-located dense draft
// model (set_draft_model): all its layers per pass, on every GPU for its rank's sequences.
// DeepSeek-V3's MTP module is the model's last layer behind two RMSNorms (of the token's embedding
// and of the previous hidden state) and a 2h -> h projection, sharing the embedding and the output
// head. Draft pass i runs it on every decode slice that drafts i tokens or more, one token each,
// attending to the slice's context + i tokens; its MoE FFN is routed and dispatched with the last
// MoE layer's placement (the module's experts spread over the replica like a layer's), so its
// all-to-all joins the step's traffic. The passes are sequential: each needs the previous one's
// token.
#include <algorithm>

#include "sim/core/horizon.h"
#include "sim/cost/op_formulas.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {
namespace {

// Draft pass `pass` (1-based) on one rank: a token for every decode slice drafting `pass` tokens
// or more, attending to the slice's context + pass tokens.
void collect_draft_slices(const std::vector<SeqSlice>& rank, int32_t pass,
                          std::vector<SeqSlice>& out) {
  out.clear();
  for (const SeqSlice& sl : rank) {
    if (!sl.prefill && sl.new_tokens - 1 >= pass) {
      out.push_back(SeqSlice{1, sl.context_tokens + pass, false});
    }
  }
}

}  // namespace

void StepModel::run_draft_passes(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                                 StepObserver* observer) {
  const double verify_end_s = *std::max_element(clock_s_.begin(), clock_s_.end());
  const auto source_layer = static_cast<int32_t>(layers_.size()) - 1;
  const auto trace_layer = static_cast<int32_t>(layers_.size());  // one past the model's layers
  const int32_t attn_class = layers_[source_layer].attn_class;
  const FfnSpec& ffn = card_.layers[source_layer].ffn;
  const int64_t hidden = card_.hidden_size;
  if (draft_model_ && !draft_gpus_.empty()) {
    run_remote_draft_passes(ranks, observer);
  } else if (draft_model_) {
    for (int32_t i = 1; i <= num_draft_tokens_; ++i) {
      bool any = false;
      for (int32_t r = 0; r < num_ranks(); ++r) {
        collect_draft_slices(ranks[r], i, draft_slices_);
        if (draft_slices_.empty()) continue;
        any = true;
        const double seconds =
            draft_model_seconds(draft_slices_, static_cast<int64_t>(draft_slices_.size()));
        for (int32_t j = 0; j < tp_; ++j) {
          advance_compute(r * tp_ + j, "draft_model", trace_layer, seconds, observer);
        }
      }
      if (!any) break;
    }
  }
  in_draft_ = true;
  for (int32_t i = 1; !draft_model_ && i <= num_draft_tokens_; ++i) {
    int64_t total_tokens = 0;
    for (int32_t r = 0; r < num_ranks(); ++r) {
      collect_draft_slices(ranks[r], i, draft_slices_);
      const auto tokens = static_cast<int64_t>(draft_slices_.size());
      rank_tokens_[r] = tokens;
      total_tokens += tokens;
      double seconds = 0;
      if (tokens > 0) {
        // The two input norms, the 2h -> h projection (a GEMM, priced as the output head's kind)
        // and the layer's attention with its own norms.
        const DType dt = card_.precision.attention;
        seconds = 2.0 * cost_.checked_seconds(rmsnorm_work(tokens, hidden, dt)) +
                  cost_.checked_seconds(lm_head_work(tokens, hidden, 2 * hidden, tp_, dt)) +
                  attention_seconds(attn_class, draft_slices_, tokens);
      }
      for (int32_t j = 0; j < tp_; ++j) {
        const int32_t g = r * tp_ + j;
        const int64_t share = tokens / tp_ + (j < tokens % tp_ ? 1 : 0);
        gpu_tokens_[g] = share;
        src_tokens_[g] = static_cast<int32_t>(share);
        advance_compute(g, "draft_attention", trace_layer, seconds, observer);
      }
    }
    ++tokens_version_;  // gpu_tokens_ are the draft pass's
    if (total_tokens == 0) break;
    if (ffn.is_moe) {
      token_counts_.tokens_per_src.assign(gpu_tokens_.begin(), gpu_tokens_.end());
      run_moe_layer(step_idx, trace_layer, source_layer, observer);
    } else {
      run_dense_ffn(trace_layer, ffn, observer);
    }
    // The shared output head on the draft tokens.
    for (int32_t r = 0; r < num_ranks(); ++r) {
      if (rank_tokens_[r] == 0) continue;
      const double h = cost_.checked_seconds(
          lm_head_work(rank_tokens_[r], hidden, card_.vocab_size, tp_, card_.precision.embeddings));
      for (int32_t j = 0; j < tp_; ++j) {
        advance_compute(r * tp_ + j, "draft_lm_head", trace_layer, h, observer);
      }
    }
  }
  in_draft_ = false;
  const double end_s = *std::max_element(clock_s_.begin(), clock_s_.end());
  if (within_horizon_s(end_s)) result_.draft_ns = from_seconds(end_s) - from_seconds(verify_end_s);
}

void StepModel::set_draft_gpus(std::vector<GpuId> draft_gpus) {
  draft_gpus_ = std::move(draft_gpus);
  draft_link_latency_s_ =
      draft_gpus_.empty()
          ? 0.0
          : to_seconds(topology_.route_latency_ns(gpus_.front(), draft_gpus_.front()));
  draft_gpu_slices_.assign(draft_gpus_.size(), {});
  result_.draft_gpu_busy_ns.assign(draft_gpus_.size(), 0);
}

bool StepModel::run_remote_draft_passes(const std::vector<std::vector<SeqSlice>>& ranks,
                                        StepObserver* observer) {
  const auto n = draft_gpus_.size();
  draft_busy_s_.assign(n, 0.0);
  double passes_s = 0;
  for (int32_t i = 1; i <= num_draft_tokens_; ++i) {
    for (auto& v : draft_gpu_slices_) v.clear();
    size_t next = 0;
    for (int32_t r = 0; r < num_ranks(); ++r) {
      collect_draft_slices(ranks[r], i, draft_slices_);
      for (const SeqSlice& sl : draft_slices_) draft_gpu_slices_[next++ % n].push_back(sl);
    }
    if (next == 0) break;
    double pass_s = 0;
    for (size_t j = 0; j < n; ++j) {
      if (draft_gpu_slices_[j].empty()) continue;
      const double s = draft_model_seconds(draft_gpu_slices_[j],
                                           static_cast<int64_t>(draft_gpu_slices_[j].size()));
      draft_busy_s_[j] += s;
      pass_s = std::max(pass_s, s);
    }
    passes_s += pass_s;
  }
  if (passes_s == 0) return false;
  // The verified tokens go to the draft GPUs and the drafts come back; the target's GPUs wait.
  const double start_s = *std::max_element(clock_s_.begin(), clock_s_.end());
  const double end_s = start_s + passes_s + 2 * draft_link_latency_s_;
  const bool in_horizon = within_horizon_s(end_s);  // else finish_step() refuses the step
  for (int32_t g = 0; g < num_gpus(); ++g) {
    const double w = end_s - clock_s_[g];
    if (observer && in_horizon && from_seconds(end_s) > from_seconds(clock_s_[g])) {
      observer->on_slice(g, "draft_wait", static_cast<int32_t>(layers_.size()),
                         from_seconds(clock_s_[g]),
                         from_seconds(end_s) - from_seconds(clock_s_[g]));
    }
    wait_s_[g] += w;
    clock_s_[g] = end_s;
  }
  if (in_horizon) {
    for (size_t j = 0; j < n; ++j) result_.draft_gpu_busy_ns[j] = from_seconds(draft_busy_s_[j]);
  }
  return true;
}

double StepModel::draft_model_seconds(const std::vector<SeqSlice>& slices, int64_t tokens) const {
  // Every GPU of the rank holds the whole draft model and runs it on the rank's drafting
  // sequences (no tensor parallelism, no collectives).
  const ModelCard& d = *draft_model_;
  const int64_t hidden = d.hidden_size;
  double s = 0;
  for (const LayerSpec& l : d.layers) {
    const AttentionWork w = attention_work(l.attention, hidden, d.precision, 1, slices);
    if (w.decode.tokens > 0) s += cost_.checked_seconds(w.decode);
    s += 2.0 * cost_.checked_seconds(rmsnorm_work(tokens, hidden, d.precision.attention));
    s += cost_.checked_seconds(
        dense_ffn_work(tokens, hidden, l.ffn.intermediate_size, 1, d.precision.dense_ffn));
  }
  return s + cost_.checked_seconds(
                 lm_head_work(tokens, hidden, d.vocab_size, 1, d.precision.embeddings));
}

}  // namespace moesim::sim
