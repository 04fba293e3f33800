// A step under a micro-batch timeline ([deployment] overlap = "two_microbatch" or
// "decode_pipeline"; docs/serving.md, "Overlap schedules"): each rank's slices split into two
// micro-batches, every MoE layer's stages priced per micro-batch, and consecutive MoE layers run
// on the timeline of layer_timeline.h. Split: each rank's slices in order fill micro-batch 0 up
// to ceil(T / 2) of its T new tokens, a prefill chunk crossing that mark cut in two (its second
// part attends to the first as cached context); decode slices stay whole. The layer's routing is
// drawn once for the whole batch and split over the micro-batches by their tokens
// (MoeLayerModel::split_microbatch); each micro-batch's collectives run on its own traffic and
// its experts are priced from its own selections (an expert hit by both reads its weights twice).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/cost/seq_slice.h"
#include "sim/model/model_card.h"
#include "sim/serving/attention_pricer.h"
#include "sim/serving/expert_pricer.h"
#include "sim/serving/layer_timeline.h"
#include "sim/serving/moe_layer_model.h"
#include "sim/serving/step_state.h"

namespace moesim::sim {

class MicrobatchPricer {
 public:
  // References must outlive the pricer. `sm`: how compute shares the SMs with the collectives.
  MicrobatchPricer(const MicrobatchSchedule& schedule, const ModelCard& card,
                   const AttentionPricer& attention, ExpertPricer& experts, int32_t num_gpus,
                   const SmSharing& sm);

  // Splits every rank's slices into the two micro-batches and prices their attention per class.
  // After AttentionPricer::price_step() on the same ranks.
  void split(const std::vector<std::vector<SeqSlice>>& ranks, const StepState& state);
  // Prices MoE layer call.layer_idx's stages per micro-batch, after `model`'s run(call), and
  // queues them for the timeline. Returns the micro-batches' collectives summed.
  CollectiveTimes price_layer(const MoeLayerCall& call, MoeLayerModel& model, StepState& state);
  // Runs the queued MoE layers on the timeline from state.clock_s (nothing when none).
  void flush(StepState& state, StepObserver* observer);
  // Drops queued layers (a step that threw may have left some untimed).
  void clear() { region_size_ = 0; }

 private:
  const MicrobatchSchedule& schedule_;
  const SmSharing sm_;
  const ModelCard& card_;
  const AttentionPricer& attention_;
  ExpertPricer& experts_;
  std::array<std::vector<std::vector<SeqSlice>>, 2> mb_ranks_;  // per micro-batch, per rank
  std::array<std::vector<int64_t>, 2> mb_gpu_tokens_;           // per micro-batch, per GPU
  // Per micro-batch, per GPU x attention class: attention seconds and its projections' share.
  std::array<std::vector<double>, 2> mb_attn_s_, mb_attn_prep_share_;
  std::vector<LayerStageCosts> region_;  // MoE layers priced, not yet timed (region_size_ used)
  size_t region_size_ = 0;
  std::vector<TimelineSpan> spans_;
  TimelineTotals totals_;
};

}  // namespace moesim::sim
