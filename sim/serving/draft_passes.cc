#include "sim/serving/draft_passes.h"

#include <algorithm>

#include "sim/core/horizon.h"
#include "sim/cost/op_formulas.h"

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

DraftPasses::DraftPasses(const ModelCard& card, const Topology& topology, const CostModel& cost,
                         const AttentionPricer& attention, const SpeculativeSetup& setup,
                         const std::vector<GpuId>& gpus, StepState& state)
    : card_(card),
      cost_(cost),
      attention_(attention),
      num_draft_tokens_(setup.num_draft_tokens),
      draft_model_(setup.draft_model),
      draft_gpus_(setup.draft_gpus) {
  if (!draft_gpus_.empty()) {
    draft_link_latency_s_ =
        to_seconds(topology.route_latency_ns(gpus.front(), draft_gpus_.front()));
  }
  draft_gpu_slices_.assign(draft_gpus_.size(), {});
  state.result.draft_gpu_busy_ns.assign(draft_gpus_.size(), 0);
}

void DraftPasses::run(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                      StepObserver* observer, DraftLayerRunner& layers, StepState& state) {
  const double verify_end_s = state.latest_clock_s();
  if (draft_model_ && !draft_gpus_.empty()) {
    run_remote_model(ranks, observer, state);
  } else if (draft_model_) {
    run_colocated_model(ranks, observer, state);
  } else {
    run_mtp_passes(step_idx, ranks, observer, layers, state);
  }
  const double end_s = state.latest_clock_s();
  if (within_horizon_s(end_s)) {
    state.result.draft_ns = from_seconds(end_s) - from_seconds(verify_end_s);
  }
}

void DraftPasses::run_colocated_model(const std::vector<std::vector<SeqSlice>>& ranks,
                                      StepObserver* observer, StepState& state) {
  const auto trace_layer = static_cast<int32_t>(card_.layers.size());  // past the model's layers
  const int32_t tp = state.tp;
  for (int32_t i = 1; i <= num_draft_tokens_; ++i) {
    bool any = false;
    for (int32_t r = 0; r < state.num_ranks(); ++r) {
      collect_draft_slices(ranks[r], i, draft_slices_);
      if (draft_slices_.empty()) continue;
      any = true;
      const double seconds =
          draft_model_seconds(draft_slices_, static_cast<int64_t>(draft_slices_.size()));
      for (int32_t j = 0; j < tp; ++j) {
        state.advance_compute(r * tp + j, "draft_model", trace_layer, seconds, observer);
      }
    }
    if (!any) break;
  }
}

void DraftPasses::run_mtp_passes(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                                 StepObserver* observer, DraftLayerRunner& layers,
                                 StepState& state) {
  const auto source_layer = static_cast<int32_t>(card_.layers.size()) - 1;
  const auto trace_layer = static_cast<int32_t>(card_.layers.size());  // past the model's layers
  const int32_t attn_class = attention_.class_of_layer(source_layer);
  const FfnSpec& ffn = card_.layers[source_layer].ffn;
  const int64_t hidden = card_.hidden_size;
  const int32_t tp = state.tp;
  for (int32_t i = 1; i <= num_draft_tokens_; ++i) {
    int64_t total_tokens = 0;
    for (int32_t r = 0; r < state.num_ranks(); ++r) {
      collect_draft_slices(ranks[r], i, draft_slices_);
      const auto tokens = static_cast<int64_t>(draft_slices_.size());
      state.rank_tokens[r] = tokens;
      total_tokens += tokens;
      double seconds = 0;
      if (tokens > 0) {
        // The two input norms, the 2h -> h projection (a GEMM, priced as the output head's kind)
        // and the layer's attention with its own norms.
        const DType dt = card_.precision.attention;
        seconds = 2.0 * cost_.checked_seconds(rmsnorm_work(tokens, hidden, dt)) +
                  cost_.checked_seconds(lm_head_work(tokens, hidden, 2 * hidden, tp, dt)) +
                  attention_.seconds(attn_class, draft_slices_, tokens);
      }
      for (int32_t j = 0; j < tp; ++j) {
        const int32_t g = r * tp + j;
        const int64_t share = tokens / tp + (j < tokens % tp ? 1 : 0);
        state.gpu_tokens[g] = share;
        state.src_tokens[g] = static_cast<int32_t>(share);
        state.advance_compute(g, "draft_attention", trace_layer, seconds, observer);
      }
    }
    ++state.tokens_version;  // gpu_tokens are the draft pass's
    if (total_tokens == 0) break;
    if (ffn.is_moe) {
      layers.run_draft_moe_layer(step_idx, trace_layer, source_layer, observer);
    } else {
      layers.run_dense_ffn(trace_layer, ffn, observer);
    }
    // The shared output head on the draft tokens.
    for (int32_t r = 0; r < state.num_ranks(); ++r) {
      if (state.rank_tokens[r] == 0) continue;
      const double h = cost_.checked_seconds(lm_head_work(
          state.rank_tokens[r], hidden, card_.vocab_size, tp, card_.precision.embeddings));
      for (int32_t j = 0; j < tp; ++j) {
        state.advance_compute(r * tp + j, "draft_lm_head", trace_layer, h, observer);
      }
    }
  }
}

bool DraftPasses::run_remote_model(const std::vector<std::vector<SeqSlice>>& ranks,
                                   StepObserver* observer, StepState& state) {
  const auto n = draft_gpus_.size();
  draft_busy_s_.assign(n, 0.0);
  double passes_s = 0;
  for (int32_t i = 1; i <= num_draft_tokens_; ++i) {
    for (auto& v : draft_gpu_slices_) v.clear();
    size_t next = 0;
    for (int32_t r = 0; r < state.num_ranks(); ++r) {
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
  const double start_s = state.latest_clock_s();
  const double end_s = start_s + passes_s + 2 * draft_link_latency_s_;
  const bool in_horizon = within_horizon_s(end_s);  // else StepModel refuses the step
  const auto trace_layer = static_cast<int32_t>(card_.layers.size());
  for (int32_t g = 0; g < state.num_gpus; ++g) {
    const double w = end_s - state.clock_s[g];
    if (observer && in_horizon && from_seconds(end_s) > from_seconds(state.clock_s[g])) {
      observer->on_slice(g, "draft_wait", trace_layer, from_seconds(state.clock_s[g]),
                         from_seconds(end_s) - from_seconds(state.clock_s[g]));
    }
    state.wait_s[g] += w;
    state.clock_s[g] = end_s;
  }
  if (in_horizon) {
    for (size_t j = 0; j < n; ++j) {
      state.result.draft_gpu_busy_ns[j] = from_seconds(draft_busy_s_[j]);
    }
  }
  return true;
}

double DraftPasses::draft_model_seconds(const std::vector<SeqSlice>& slices, int64_t tokens) const {
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
