// The step model: how long one step of one replica takes, layer by layer, on every GPU. It is
// the timeline over a step's stages: per layer, attention (AttentionPricer) on every GPU, then a
// dense FFN, or a MoE layer (router, then a MoeLayerModel routes the tokens, prices the experts
// and times the dispatch and combine all-to-alls, each a barrier: it starts when the last GPU is
// ready and ends when its last flow ends). Per-GPU clocks advance through the layers; time a GPU
// spends waiting for the slowest one at a barrier is wait. Overlap schedules (docs/serving.md,
// "Overlap schedules"): "simple" prices a MoE layer as max(C, D) + min(C, D) / 2 of its compute C
// and collectives D; the micro-batch timelines run in MicrobatchPricer. Then the output head, and
// the draft passes of speculative decoding (DraftPasses). Op costs come from sim/cost.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/core/ids.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/seq_slice.h"
#include "sim/model/model_card.h"
#include "sim/network/network_model.h"
#include "sim/placement/layer_placements.h"
#include "sim/routing/routing_model.h"
#include "sim/scenario/deployment.h"
#include "sim/serving/attention_pricer.h"
#include "sim/serving/draft_passes.h"
#include "sim/serving/expert_pricer.h"
#include "sim/serving/load_reporter.h"
#include "sim/serving/microbatch_pricer.h"
#include "sim/serving/moe_layer_model.h"
#include "sim/serving/nic_links.h"
#include "sim/serving/step_model_options.h"
#include "sim/serving/step_result.h"
#include "sim/serving/step_state.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

class FastMoeLayer;

// One step to time.
struct StepInput {
  int64_t step_idx = 0;
  // ranks[r]: attention rank r's sequence slices (one entry per rank).
  const std::vector<std::vector<SeqSlice>>* ranks = nullptr;
  StepObserver* observer = nullptr;  // may be null
  // Host-link contention for this step only (docs/serving.md): per replica GPU, factors >= 1 by
  // which the time per byte of its NIC link in / out grows, on both fidelities; empty: none.
  std::span<const double> nic_in_slowdown, nic_out_slowdown;
};

class StepModel final : private DraftLayerRunner {
 public:
  // `gpus`: the replica's GPUs; `placements`: routed experts on replica GPU indices, one map per
  // MoE layer (null for models without MoE layers): MoE layer l is routed, dispatched and priced
  // with placements->layer(l). References and pointers must outlive the model; placements may
  // change between steps. `network` and `routing` are required with MoE layers.
  StepModel(const ModelCard& card, const Topology& topology, const DeploymentSpec& deployment,
            std::vector<GpuId> gpus, const LayerPlacements* placements, const CostModel& cost,
            NetworkModel* network, RoutingModel* routing, StepModelOptions options = {});
  ~StepModel() override;

  int32_t num_gpus() const { return static_cast<int32_t>(gpus_.size()); }
  // Attention ranks (GPUs / attention_tp).
  int32_t num_ranks() const { return num_gpus() / tp_; }
  const StepModelOptions& options() const { return options_; }
  bool fast_fidelity() const { return options_.fidelity == Fidelity::kFast; }
  // Why the fast fidelity can never apply to this replica's collectives ("" when it can).
  std::string fast_fidelity_refusal() const;
  // The routed-expert memo this model prices through (null when none applies).
  const std::shared_ptr<ExpertMemoTable>& expert_memo() const { return experts_.memo(); }

  // Times one step. The result stays valid until the next run().
  const StepResult& run(const StepInput& input);
  const StepResult& run(int64_t step_idx, const std::vector<std::vector<SeqSlice>>& ranks,
                        StepObserver* observer) {
    return run(StepInput{step_idx, &ranks, observer, {}, {}});
  }

 private:
  struct LayerInfo {
    int32_t attn_class = 0;
    int32_t moe_idx = -1;  // -1 for dense layers
  };
  void run_layers(int64_t step_idx, StepObserver* observer);
  // Card layer `source_layer_idx`'s MoE layer (router to combine), traced as `layer_idx`, then its
  // timeline (barriers, simple overlap, or queued for the micro-batch timeline). With
  // `router_run`, run_attention_and_router() has run its router.
  void run_moe_layer(int64_t step_idx, int32_t layer_idx, int32_t source_layer_idx,
                     StepObserver* observer, bool router_run, bool in_draft);
  // A layer's attention then its router on every GPU in one pass, without an observer, through
  // the pricer's memo; the clocks as the two loops leave them, their latest into ready_s_.
  void run_attention_and_router(int32_t attn_class, const MoeSpec& moe);
  void run_router(int32_t layer_idx, const MoeSpec& moe, StepObserver* observer);
  void run_lm_head(const std::vector<std::vector<SeqSlice>>& ranks, StepObserver* observer);
  void apply_nic_slowdown(std::span<const double> in, std::span<const double> out);
  // DraftLayerRunner.
  void run_draft_moe_layer(int64_t step_idx, int32_t trace_layer_idx, int32_t source_layer_idx,
                           StepObserver* observer) override;
  void run_dense_ffn(int32_t layer_idx, const FfnSpec& ffn, StepObserver* observer) override;

  const ModelCard& card_;
  const Topology& topology_;
  DeploymentSpec deployment_;
  std::vector<GpuId> gpus_;
  const LayerPlacements* placements_ = nullptr;
  const CostModel& cost_;
  NetworkModel* network_ = nullptr;
  StepModelOptions options_;
  int32_t tp_ = 1;
  std::vector<LayerInfo> layers_;
  StepState state_;
  AttentionPricer attention_;
  ExpertPricer experts_;
  std::unique_ptr<NicLinks> nic_;
  std::unique_ptr<LoadReporter> reporter_;
  std::unique_ptr<MoeLayerModel> moe_layer_;      // the fidelity's implementation; null without MoE
  FastMoeLayer* fast_layer_ = nullptr;            // moe_layer_ on the fast fidelity
  std::unique_ptr<MicrobatchPricer> microbatch_;  // micro-batch timelines; null otherwise
  std::unique_ptr<DraftPasses> draft_;            // speculative decoding; null otherwise
  bool nic_slowed_ = false;                       // the last run() applied a slowdown
  double ready_s_ = 0;                            // run_attention_and_router()'s latest clock
};

}  // namespace moesim::sim
