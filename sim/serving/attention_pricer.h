// Attention pricing of a step: every layer's attention with its two RMSNorms (and, under
// attention tensor parallelism, the ring all-reduce of its output over NVLink), priced once per
// attention rank and layer class (layers with equal attention specs cost alike).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/cost/seq_slice.h"
#include "sim/model/model_card.h"
#include "sim/serving/step_state.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

class AttentionPricer {
 public:
  // `tp`: GPUs per attention rank. References must outlive the pricer.
  AttentionPricer(const ModelCard& card, const Topology& topology, const CostModel& cost,
                  int32_t tp, int32_t num_gpus);

  int32_t num_classes() const { return static_cast<int32_t>(classes_.size()); }
  // The attention class of card layer `layer_idx`.
  int32_t class_of_layer(int32_t layer_idx) const { return layer_class_[layer_idx]; }
  const AttentionSpec& spec(int32_t attn_class) const { return classes_[attn_class]; }

  // Seconds of class `attn_class` on one GPU over `seqs` (`tokens` new tokens): attention, two
  // RMSNorms, the TP all-reduce. 0 without tokens.
  double seconds(int32_t attn_class, std::span<const SeqSlice> seqs, int64_t tokens) const;
  // Prices every rank's slices per class (seconds_on) and writes the tokens per rank and per GPU
  // (a rank's tokens split over its GPUs for the MoE part) into `state`, bumping its tokens
  // version. Returns the step's tokens.
  int64_t price_step(const std::vector<std::vector<SeqSlice>>& ranks, StepState& state);
  // price_step()'s seconds of class `attn_class` on GPU g.
  double seconds_on(int32_t g, int32_t attn_class) const {
    return attn_s_[static_cast<size_t>(g) * classes_.size() + static_cast<size_t>(attn_class)];
  }

 private:
  const ModelCard& card_;
  const Topology& topology_;
  const CostModel& cost_;
  int32_t tp_ = 1;
  std::vector<AttentionSpec> classes_;
  std::vector<int32_t> layer_class_;  // per card layer
  std::vector<double> attn_s_;        // per GPU x class
};

}  // namespace moesim::sim
