// The micro-batch timeline of consecutive MoE layers (docs/serving.md, "Overlap schedules"): each
// GPU has a compute resource (one op at a time, in issue order) and a communication resource (one
// collective at a time; a collective is a barrier over the replica's GPUs). Two micro-batches run
// each layer's op chain (attention, router, dispatch, experts and shared experts, combine). A
// schedule is data: one layer's ops cut into stages at yield points, micro-batch 1 started
// delta_stages after micro-batch 0, then one stage of each in turn, as SGLang's two-batch-overlap
// executor runs DeepSeek's strategies. SM sharing: a running collective holds some of every GPU's
// SMs, and compute beside it progresses at the rate of the SMs left (processor sharing: an op's
// rate changes where a collective starts or ends under it; its work is conserved).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace moesim::sim {

enum class StageOp : int8_t {
  kAttentionPrep,  // the attention's projections (ATTN-0 of DeepSeek's decode pipeline)
  kAttention,      // attention + norms (ATTN-1 where kAttentionPrep runs before it)
  kRouter,         // router gate and permutation
  kDispatch,       // all-to-all (communication resource)
  kSharedExperts,  // shared experts on the micro-batch's own tokens
  kExperts,        // routed experts on the received tokens, and the weighted combine sum
  kCombine,        // all-to-all (communication resource)
};
inline constexpr int32_t kNumStageOps = 7;

// Whether `op` runs on the communication resource (kDispatch, kCombine).
bool is_comm_op(StageOp op);
// "attention_prep", "attention", "router", "dispatch", "shared_experts", "experts", "combine".
const char* stage_op_name(StageOp op);
// The trace name of `op` for micro-batch `mb` (0 or 1): "<op name>/mb<mb>", a static string.
const char* stage_span_name(StageOp op, int32_t mb);

struct MicrobatchSchedule {
  std::string name;
  int32_t num_microbatches = 2;  // 1 or 2
  // One layer's ops in issue order, cut into stages (each op at most once).
  std::vector<std::vector<StageOp>> stages;
  int32_t delta_stages = 0;  // stages micro-batch 0 runs before micro-batch 1 starts
  bool has(StageOp op) const;
};

// DeepSeek's prefill (SGLang _compute_moe_deepseek_blog_prefill, delta 0):
//   [attention, router, dispatch] [experts, combine] [shared_experts]
const MicrobatchSchedule& two_microbatch_schedule();
// DeepSeek's decode, attention in two steps (SGLang _compute_moe_deepseek_blog_decode, delta 2):
//   [attention_prep] [attention, router] [dispatch, shared_experts] [experts, combine] []
const MicrobatchSchedule& decode_pipeline_schedule();
// One micro-batch, no overlap: [attention, router, dispatch, experts, combine]; the step model's
// barrier path (StepModel without overlap) as a timeline, for tests.
const MicrobatchSchedule& sequential_schedule();

// One layer's costs: compute seconds per (micro-batch, op, GPU) and collective seconds per
// (micro-batch, op). Ops the schedule does not run must cost 0.
struct LayerStageCosts {
  int32_t layer_idx = 0;  // for the spans
  int32_t num_gpus = 0;
  std::vector<double> compute_s;  // [(mb * kNumStageOps + op) * num_gpus + g]
  std::vector<double> comm_s;     // [mb * kNumStageOps + op]

  // Zeroes and sizes for `gpus` GPUs, 2 micro-batches.
  void reset(int32_t layer, int32_t gpus);
  double& compute(int32_t mb, StageOp op, int32_t g) {
    return compute_s[(static_cast<size_t>(mb) * kNumStageOps + static_cast<size_t>(op)) *
                         static_cast<size_t>(num_gpus) +
                     static_cast<size_t>(g)];
  }
  double compute(int32_t mb, StageOp op, int32_t g) const {
    return compute_s[(static_cast<size_t>(mb) * kNumStageOps + static_cast<size_t>(op)) *
                         static_cast<size_t>(num_gpus) +
                     static_cast<size_t>(g)];
  }
  double& comm(int32_t mb, StageOp op) {
    return comm_s[static_cast<size_t>(mb) * kNumStageOps + static_cast<size_t>(op)];
  }
  double comm(int32_t mb, StageOp op) const {
    return comm_s[static_cast<size_t>(mb) * kNumStageOps + static_cast<size_t>(op)];
  }
};

// SMs of one GPU and the SMs a running collective holds on every GPU (docs/serving.md, "SM
// sharing"): compute beside a collective runs at compute_rate() of its full rate.
struct SmSharing {
  int32_t gpu_sms = 0;   // >= 1 when comm_sms > 0
  int32_t comm_sms = 0;  // 0 <= comm_sms < gpu_sms (0: no sharing, whatever gpu_sms is)
  // (gpu_sms - comm_sms) / gpu_sms: the linear rule (no public measurement of compute at a reduced
  // SM count); exactly 1 when comm_sms is 0.
  double compute_rate() const;
};

// One op of one micro-batch on one GPU as the timeline placed it (seconds). A compute op slowed by
// SM sharing took sm_lost_s longer than its full-rate time (duration_s - sm_lost_s); 0 otherwise.
struct TimelineSpan {
  int32_t gpu = 0;
  int32_t layer_idx = 0;
  int32_t mb = 0;
  StageOp op = StageOp::kAttention;
  double start_s = 0, duration_s = 0;
  double sm_lost_s = 0;
};

// Per GPU over the run: time computing (SM-sharing slowdowns included), in collectives (summed:
// they overlap compute), and neither (idle waiting for a dependency or a barrier), each in seconds.
struct TimelineTotals {
  std::vector<double> compute_s, comm_s, wait_s;
};

// Runs `layers` (consecutive MoE layers) under `schedule`, compute sharing each GPU's SMs with the
// collectives as `sm` says. Every micro-batch of GPU g is ready at clock_s[g] (>= 0); on return
// clock_s[g] is the end of GPU g's last op (both micro-batches joined). Adds to `totals` (sized
// like clock_s). `spans`, when non-null, receives every op with its start and duration,
// zero-length ones included, in issue order (per op, GPU 0 first).
void run_microbatch_timeline(const MicrobatchSchedule& schedule,
                             std::span<const LayerStageCosts> layers, const SmSharing& sm,
                             std::vector<double>& clock_s, TimelineTotals& totals,
                             std::vector<TimelineSpan>* spans);

}  // namespace moesim::sim
