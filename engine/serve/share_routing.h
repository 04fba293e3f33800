// Routing of a served step's tokens, drawn from the scenario's routing statistics.
//
// The engine's activations are synthetic and do not evolve from step to step, so its real router
// would pick the same experts for every step: a routing no deployment sees. The serving loop
// therefore forces each token's experts from the request trace's per-layer expert shares
// (docs/schemas/request_trace.md, `routing.expert_share`): each token draws top_k distinct experts
// with probability proportional to their shares (weighted sampling without replacement,
// Efraimidis-Spirakis keys u^(1/w)), and each pick runs on the source GPU when it holds a
// replica of the expert, else on the replica-holding GPUs of the step's replica in turn. The
// router op still runs (and costs what it costs); only its choice is replaced, as in the replay.
// Deterministic: the draws of (step, layer, GPU) come from one SplitMix64 stream of the seed.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/step_trace.h"

namespace moesim::engine::serve {

// Tokens whose attention runs on each GPU in one step (GPUs of one replica, any order).
using TokensPerGpu = std::vector<std::pair<int32_t, int64_t>>;

// The routing entries of one MoE layer for the tokens of `tokens_per_gpu`. `share` has one
// non-negative weight per routed expert (at least top_k of them positive; checked by the trace
// reader); `placement` gives the GPUs holding each expert, and `replica_gpus` the step's replica
// (each expert has a replica among them). Counts are merged per (source, expert, destination),
// sorted by source GPU, then expert, then destination.
std::vector<RoutingEntry> sample_share_routing(const std::vector<double>& share, int64_t top_k,
                                               const TokensPerGpu& tokens_per_gpu,
                                               const TracePlacement& placement,
                                               const std::vector<int32_t>& replica_gpus,
                                               uint64_t seed);

// The stream seed of (root seed, step, MoE layer index).
uint64_t routing_seed(uint64_t root_seed, int64_t step_idx, int64_t layer_idx);

}  // namespace moesim::engine::serve
