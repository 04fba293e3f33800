// The draft passes of speculative decoding (docs/serving.md, "Speculative decoding"), after a
// step's verification: with the card's MTP modules, with a co-located dense draft model, or with
// a draft model on GPUs of its own. DeepSeek-V3's MTP module is the model's last layer behind two
// RMSNorms (of the token's embedding and of the previous hidden state) and a 2h -> h projection,
// sharing the embedding and the output head; pass i runs it on every decode slice drafting i
// tokens or more, one token each, its MoE FFN routed and dispatched like the last MoE layer. The
// passes are sequential: each needs the previous one's token.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/seq_slice.h"
#include "sim/model/model_card.h"
#include "sim/serving/attention_pricer.h"
#include "sim/serving/step_model_options.h"
#include "sim/serving/step_state.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// The step model's layers as a draft pass runs them (StepModel implements it).
class DraftLayerRunner {
 public:
  virtual ~DraftLayerRunner() = default;
  // Card layer `source_layer_idx`'s MoE FFN (router to combine) on state.gpu_tokens, traced as
  // `trace_layer_idx`, with barriers, no expert loads and no routing to observers.
  virtual void run_draft_moe_layer(int64_t step_idx, int32_t trace_layer_idx,
                                   int32_t source_layer_idx, StepObserver* observer) = 0;
  // A dense FFN on state.rank_tokens, traced as `trace_layer_idx`.
  virtual void run_dense_ffn(int32_t trace_layer_idx, const FfnSpec& ffn,
                             StepObserver* observer) = 0;
};

class DraftPasses {
 public:
  // `gpus`: the replica's GPUs. References must outlive the passes; `setup.draft_model` too.
  DraftPasses(const ModelCard& card, const Topology& topology, const CostModel& cost,
              const AttentionPricer& attention, const SpeculativeSetup& setup,
              const std::vector<GpuId>& gpus, StepState& state);

  bool enabled() const { return num_draft_tokens_ > 0; }
  // Runs the passes after the verification's output head over `ranks`' decode slices; sets
  // state.result.draft_ns (and draft_gpu_busy_ns with draft GPUs).
  void run(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
           StepObserver* observer, DraftLayerRunner& layers, StepState& state);

 private:
  void run_mtp_passes(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                      StepObserver* observer, DraftLayerRunner& layers, StepState& state);
  void run_colocated_model(const std::vector<std::vector<SeqSlice>>& ranks, StepObserver* observer,
                           StepState& state);
  // Passes on the draft GPUs; false when there were no drafting sequences.
  bool run_remote_model(const std::vector<std::vector<SeqSlice>>& ranks, StepObserver* observer,
                        StepState& state);
  // Seconds of one draft-model pass over `slices` (`tokens` of them) on one GPU.
  double draft_model_seconds(const std::vector<SeqSlice>& slices, int64_t tokens) const;

  const ModelCard& card_;
  const CostModel& cost_;
  const AttentionPricer& attention_;
  int32_t num_draft_tokens_ = 0;
  const ModelCard* draft_model_ = nullptr;
  std::vector<GpuId> draft_gpus_;
  double draft_link_latency_s_ = 0;  // one way, replica GPU 0 -> first draft GPU
  std::vector<std::vector<SeqSlice>> draft_gpu_slices_;
  std::vector<double> draft_busy_s_;
  std::vector<SeqSlice> draft_slices_;
};

}  // namespace moesim::sim
