// What a replica serves once a plan is applied: pruning frees each layer's pruned slots and the
// kept experts are re-packed over the EP group (kept expert i of a layer on GPU
// floor(i * G / kept), the same map in every layer), so weight memory per GPU falls with
// ceil(kept / G) slots per layer; the card's MoE layers have `kept` experts (router rows shrink
// with it) and no expert groups.
#pragma once

#include <cstdint>

#include "sim/model/model_card.h"
#include "sim/placement/expert_placement.h"

namespace moesim::sim {

// The card with every MoE layer reduced to num_kept routed experts and its groups collapsed to
// one (the pruned router no longer group-limits). Not re-validated: the group constraints of the
// original no longer apply. Precondition (checked): num_kept in [top_k, experts] of every layer.
ModelCard pruned_model_card(const ModelCard& card, int32_t num_kept);
// Kept experts re-packed over the EP group: compacted expert i on GPU floor(i * num_gpus /
// num_kept) (GPUs hold floor or ceil of num_kept / num_gpus; some none when num_kept < GPUs).
ExpertPlacement repacked_placement(int32_t num_kept, int32_t num_gpus, int32_t gpus_per_node,
                                   int32_t num_shared_experts);

}  // namespace moesim::sim
