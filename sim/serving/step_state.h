// The state the stages of one step share: per-GPU clocks and time sums, the step's tokens per
// attention rank and per GPU, and the result being filled. StepModel owns it; its components
// (attention and expert pricing, the MoE-layer models, micro-batch pricing, draft passes) read
// and advance it, each GPU's clock moving only forward.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/serving/step_result.h"

namespace moesim::sim {

// A span of `dur_s` seconds from `start_s` on GPU g for the observer (if any). Spans that round
// to 0 ns (float residue of equal clocks) are not reported, nor spans ending past the horizon
// (StepModel refuses such a step). With `sm_lost_s` > 0 (a compute span slowed by SM sharing) the
// observer's on_sm_sharing() follows. Returns whether the span was reported.
bool trace_span(StepObserver* observer, int32_t g, const char* name, int32_t layer_idx,
                double start_s, double dur_s, double sm_lost_s = 0);

struct StepState {
  int32_t num_gpus = 0;
  int32_t tp = 1;  // GPUs per attention rank
  // Per GPU, seconds from the step's start: where its timeline stands, and its time computing,
  // in collectives and waiting at barriers so far.
  std::vector<double> clock_s, compute_s, comm_s, wait_s;
  std::vector<int64_t> gpu_tokens;   // new tokens per GPU (the MoE layers' sources)
  std::vector<int64_t> rank_tokens;  // new tokens per attention rank
  std::vector<int32_t> src_tokens;   // gpu_tokens, as routing queries take them
  // Bumped by every change of gpu_tokens (consumers keep derived figures per version).
  uint64_t tokens_version = 1;
  int64_t step_tokens = 0;  // new tokens of the running step
  StepResult result;

  int32_t num_ranks() const { return num_gpus / tp; }
  // Sizes everything for `gpus` GPUs in ranks of `gpus_per_rank`.
  void resize(int32_t gpus, int32_t gpus_per_rank);
  // Zeroes the clocks, sums and result for a new step (NIC byte sums sized when tracked).
  void begin(bool track_nic_bytes);
  // `seconds` of compute on GPU g, traced as `name` (inline: the per-GPU loops' hot path).
  void advance_compute(int32_t g, const char* name, int32_t layer_idx, double seconds,
                       StepObserver* observer) {
    if (observer) trace_span(observer, g, name, layer_idx, clock_s[g], seconds);
    clock_s[g] += seconds;
    compute_s[g] += seconds;
  }
  // The latest clock.
  double latest_clock_s() const;

  // The barriers of a MoE layer: every GPU waits for the latest clock `ready` (which the caller
  // may know already), the dispatch takes dispatch_s, each GPU computes its ffn_s[g], all wait
  // for the slowest (max_ffn_s is the largest of ffn_s), then the combine takes combine_s.
  void advance_with_barriers(int32_t layer_idx, std::span<const double> ffn_s, double max_ffn_s,
                             double dispatch_s, double combine_s, double ready,
                             StepObserver* observer);
  // The simple overlap of two half micro-batches: max(C, D) + min(C, D) / 2 from the layer's
  // start barrier, C the compute after it (ffn_s included) and D the two collectives.
  void advance_overlapped(int32_t layer_idx, std::span<const double> ffn_s, double dispatch_s,
                          double combine_s, StepObserver* observer);
  // Rounds the clocks and sums into the result (its duration the latest clock, at least 1 ns);
  // false, changing nothing, when the step ends past the horizon.
  bool finish();
  // The HorizonError of a step finish() refused: `what` describes the step and `cost_inputs`
  // what priced it (CostModel::describe_inputs).
  [[noreturn]] void throw_beyond_horizon(const std::string& what,
                                         const std::string& cost_inputs) const;
};

}  // namespace moesim::sim
