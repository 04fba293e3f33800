#include "sim/serving/step_model.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/check.h"
#include "sim/core/horizon.h"
#include "sim/cost/op_formulas.h"
#include "sim/serving/exact_moe_layer.h"
#include "sim/serving/fast_moe_layer.h"

namespace moesim::sim {

StepModel::StepModel(const ModelCard& card, const Topology& topology,
                     const DeploymentSpec& deployment, std::vector<GpuId> gpus,
                     const LayerPlacements* placements, const CostModel& cost,
                     NetworkModel* network, RoutingModel* routing, StepModelOptions options)
    : card_(card),
      topology_(topology),
      deployment_(deployment),
      gpus_(std::move(gpus)),
      placements_(placements),
      cost_(cost),
      network_(network),
      options_(std::move(options)),
      tp_(deployment.attention == AttentionParallel::kTensor ? deployment.attention_tp : 1),
      attention_(card, topology, cost, tp_, static_cast<int32_t>(gpus_.size())),
      experts_(card, cost, static_cast<int32_t>(gpus_.size()), options_.expert_memo) {
  const auto n = static_cast<int32_t>(gpus_.size());
  state_.resize(n, tp_);
  const MoeSpec* moe = nullptr;
  int32_t moe_idx = 0;
  for (size_t li = 0; li < card_.layers.size(); ++li) {
    LayerInfo info;
    info.attn_class = attention_.class_of_layer(static_cast<int32_t>(li));
    if (card_.layers[li].ffn.is_moe) {
      info.moe_idx = moe_idx++;
      if (!moe) moe = &card_.layers[li].ffn.moe;
    }
    layers_.push_back(info);
  }
  if (moe) {
    MOESIM_CHECK(network_ && routing && placements_,
                 "MoE step model needs placement, network and routing models");
    MOESIM_CHECK(placements_->num_layers() == moe_idx, "one placement per MoE layer");
    MOESIM_CHECK(placements_->num_experts() == moe->num_routed_experts,
                 "placement size differs from the number of experts");
    MOESIM_CHECK(placements_->num_gpus() == n, "placement GPUs differ from the replica's");
    reporter_ = std::make_unique<LoadReporter>(card_, *placements_, *routing);
    if (options_.track_nic_bytes) nic_ = std::make_unique<NicLinks>(topology_, gpus_);
    const int64_t width = moe->latent_dim > 0 ? moe->latent_dim : card_.hidden_size;
    const MoeLayerDeps deps{card_,
                            topology_,
                            deployment_,
                            gpus_,
                            *placements_,
                            *network_,
                            *routing,
                            experts_,
                            *reporter_,
                            options_,
                            nic_.get(),
                            token_bytes(width, deployment_.dispatch_dtype),
                            token_bytes(width, deployment_.combine_dtype)};
    if (options_.fidelity == Fidelity::kFast) {
      auto fast = std::make_unique<FastMoeLayer>(deps);
      fast_layer_ = fast.get();
      moe_layer_ = std::move(fast);
    } else {
      moe_layer_ = std::make_unique<ExactMoeLayer>(deps);
    }
    const MicrobatchSchedule* schedule = nullptr;
    if (deployment_.overlap == OverlapMode::kTwoMicrobatch) schedule = &two_microbatch_schedule();
    if (deployment_.overlap == OverlapMode::kDecodePipeline) {
      schedule = &decode_pipeline_schedule();
    }
    if (schedule) {
      // docs/serving.md, "SM sharing": the collectives hold comm_sms of each GPU's SMs.
      const SmSharing sm{topology_.gpu_spec().num_sms, deployment_.comm_sms};
      microbatch_ =
          std::make_unique<MicrobatchPricer>(*schedule, card_, attention_, experts_, n, sm);
    }
  }
  if (options_.speculative.num_draft_tokens > 0) {
    draft_ = std::make_unique<DraftPasses>(card_, topology_, cost_, attention_,
                                           options_.speculative, gpus_, state_);
  }
}

StepModel::~StepModel() = default;

std::string StepModel::fast_fidelity_refusal() const {
  if (!moe_layer_) return "";
  if (fast_layer_) return fast_layer_->why_not();
  return FastAllToAll(topology_, gpus_, deployment_.dispatch).why_not();
}

const StepResult& StepModel::run(const StepInput& input) {
  const std::vector<std::vector<SeqSlice>>& ranks = *input.ranks;
  MOESIM_CHECK(static_cast<int32_t>(ranks.size()) == num_ranks(), "ranks size mismatch");
  if (nic_slowed_ || !input.nic_in_slowdown.empty() || !input.nic_out_slowdown.empty()) {
    apply_nic_slowdown(input.nic_in_slowdown, input.nic_out_slowdown);
  }
  state_.begin(options_.track_nic_bytes);
  if (microbatch_) microbatch_->clear();
  state_.step_tokens = attention_.price_step(ranks, state_);
  if (state_.step_tokens == 0) return state_.result;
  if (microbatch_) microbatch_->split(ranks, state_);
  run_layers(input.step_idx, input.observer);
  run_lm_head(ranks, input.observer);
  if (draft_) draft_->run(input.step_idx, ranks, input.observer, *this, state_);
  if (!state_.finish()) [[unlikely]] {
    state_.throw_beyond_horizon("step model: a step of " + std::to_string(state_.step_tokens) +
                                    " tokens on " + std::to_string(num_gpus()) + " GPUs over " +
                                    std::to_string(layers_.size()) + " layers",
                                cost_.describe_inputs());
  }
  return state_.result;
}

void StepModel::run_layers(int64_t step_idx, StepObserver* observer) {
  const int32_t n = num_gpus();
  for (int32_t li = 0; li < static_cast<int32_t>(layers_.size()); ++li) {
    const LayerInfo& info = layers_[li];
    if (microbatch_ && info.moe_idx >= 0) {
      // Attention included: the layer's stages run on the micro-batch timeline.
      run_moe_layer(step_idx, li, li, observer, false, false);
      continue;
    }
    if (microbatch_) microbatch_->flush(state_, observer);
    const FfnSpec& ffn = card_.layers[li].ffn;
    if (ffn.is_moe && !observer && experts_.memo_allowed()) {
      run_attention_and_router(info.attn_class, ffn.moe);
      run_moe_layer(step_idx, li, li, observer, /*router_run=*/true, false);
      continue;
    }
    for (int32_t g = 0; g < n; ++g) {
      state_.advance_compute(g, "attention", li, attention_.seconds_on(g, info.attn_class),
                             observer);
    }
    if (ffn.is_moe) {
      run_moe_layer(step_idx, li, li, observer, false, false);
    } else {
      run_dense_ffn(li, ffn, observer);
    }
  }
  if (microbatch_) microbatch_->flush(state_, observer);
}

void StepModel::run_attention_and_router(int32_t attn_class, const MoeSpec& m) {
  // advance_compute(g, "attention", ...) then run_router()'s advance_compute(g, "router", ...).
  experts_.use_spec(m);
  double ready = -std::numeric_limits<double>::infinity();
  for (int32_t g = 0; g < num_gpus(); ++g) {
    const double a = attention_.seconds_on(g, attn_class);
    double clock = state_.clock_s[g] + a;
    double compute = state_.compute_s[g] + a;
    if (state_.gpu_tokens[g] != 0) {
      const double r = experts_.memo_router_seconds(g, state_.gpu_tokens[g]);
      clock += r;
      compute += r;
    }
    state_.clock_s[g] = clock;
    state_.compute_s[g] = compute;
    ready = std::max(ready, clock);
  }
  ready_s_ = ready;
}

void StepModel::run_router(int32_t layer_idx, const MoeSpec& m, StepObserver* observer) {
  // Router and permutation on every GPU.
  if (experts_.memo_allowed()) experts_.use_spec(m);
  for (int32_t g = 0; g < num_gpus(); ++g) {
    const int64_t t = state_.gpu_tokens[g];
    if (t == 0) continue;
    const double r = experts_.memo_allowed() ? experts_.memo_router_seconds(g, t)
                                             : experts_.router_seconds(m, t);
    state_.advance_compute(g, "router", layer_idx, r, observer);
  }
}

void StepModel::run_draft_moe_layer(int64_t step_idx, int32_t trace_layer_idx,
                                    int32_t source_layer_idx, StepObserver* observer) {
  run_moe_layer(step_idx, trace_layer_idx, source_layer_idx, observer, false, /*in_draft=*/true);
}

void StepModel::run_moe_layer(int64_t step_idx, int32_t layer_idx, int32_t source_layer_idx,
                              StepObserver* observer, bool router_run, bool in_draft) {
  const MoeSpec& m = card_.layers[source_layer_idx].ffn.moe;
  // Under a micro-batch timeline the layer is priced per micro-batch and timed later; draft
  // passes keep the barriers.
  const bool microbatched = microbatch_ && !in_draft;
  if (!microbatched && !router_run) run_router(layer_idx, m, observer);
  const MoeLayerCall call{step_idx, layer_idx, layers_[source_layer_idx].moe_idx, &m, microbatched,
                          in_draft, observer};
  CollectiveTimes t = moe_layer_->run(call, state_);
  if (microbatched) {
    const CollectiveTimes total = microbatch_->price_layer(call, *moe_layer_, state_);
    state_.result.dispatch_bytes += total.dispatch_bytes;
    state_.result.combine_bytes += total.combine_bytes;
    return;
  }
  const double dispatch_s = options_.dispatch_kernel.seconds(t.dispatch_s);
  const double combine_s = options_.combine_kernel.seconds(t.combine_s);
  state_.result.dispatch_bytes += t.dispatch_bytes;
  state_.result.combine_bytes += t.combine_bytes;
  if (deployment_.overlap == OverlapMode::kSimple) {
    state_.advance_overlapped(layer_idx, experts_.ffn_s(), dispatch_s, combine_s, observer);
  } else {
    state_.advance_with_barriers(layer_idx, experts_.ffn_s(), experts_.max_ffn_s(), dispatch_s,
                                 combine_s, router_run ? ready_s_ : state_.latest_clock_s(),
                                 observer);
  }
}

void StepModel::run_dense_ffn(int32_t layer_idx, const FfnSpec& ffn, StepObserver* observer) {
  for (int32_t g = 0; g < num_gpus(); ++g) {
    // Dense FFN: every GPU of a TP group runs its weight shard on all of the rank's tokens.
    const int64_t t = state_.rank_tokens[g / tp_];
    if (t == 0) continue;
    const double f = cost_.checked_seconds(dense_ffn_work(
        t, card_.hidden_size, ffn.intermediate_size, tp_, card_.precision.dense_ffn));
    state_.advance_compute(g, "dense_ffn", layer_idx, f, observer);
  }
}

void StepModel::run_lm_head(const std::vector<std::vector<SeqSlice>>& ranks,
                            StepObserver* observer) {
  // Output head on every GPU for the sequences that emit a token.
  for (int32_t r = 0; r < num_ranks(); ++r) {
    // One row per sequence, and one per verified token of a speculative decode slice.
    auto emitting = static_cast<int64_t>(ranks[r].size());
    if (draft_) {
      for (const SeqSlice& sl : ranks[r]) emitting += sl.prefill ? 0 : sl.new_tokens - 1;
    }
    if (emitting == 0) continue;
    const double h = cost_.checked_seconds(lm_head_work(
        emitting, card_.hidden_size, card_.vocab_size, tp_, card_.precision.embeddings));
    for (int32_t j = 0; j < tp_; ++j) {
      state_.advance_compute(r * tp_ + j, "lm_head", -1, h, observer);
    }
  }
}

void StepModel::apply_nic_slowdown(std::span<const double> in, std::span<const double> out) {
  MOESIM_CHECK((in.empty() || static_cast<int32_t>(in.size()) == num_gpus()) &&
                   (out.empty() || static_cast<int32_t>(out.size()) == num_gpus()),
               "a NIC slowdown per replica GPU");
  nic_slowed_ = !in.empty() || !out.empty();
  if (fast_layer_) fast_layer_->set_nic_slowdown(in, out);
  if (!network_) return;
  if (!nic_) nic_ = std::make_unique<NicLinks>(topology_, gpus_);
  MOESIM_CHECK(network_->set_link_slowdown(nic_->link_slowdown(in, out)),
               "the network model does not support host-link contention");
}

}  // namespace moesim::sim
