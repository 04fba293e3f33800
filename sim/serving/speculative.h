// Speculative decoding with the model's MTP modules or a co-located draft model (the
// [speculative] table, sim/scenario/speculative_spec.h): the acceptance draws of verified draft
// tokens, the totals the run reports, and the memory the drafter takes on a GPU.
//
// Per step a decoding sequence with r tokens still to produce verifies 1 + d tokens, d =
// min(k, r - 1) drafts (never drafting past its output length). Draft i (1-based) is accepted
// with probability acceptance[i - 1] given that drafts 1..i - 1 were, one uniform draw each from
// the stream "speculative.accept", stopping at the first rejection; the sequence commits the
// accepted drafts plus the target model's own next token. The draws are taken in the order the
// finished step lists its sequences (the scheduler's batch order), so a run is deterministic.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "sim/model/model_card.h"
#include "sim/scenario/speculative_spec.h"

namespace moesim::sim {

// What speculative decoding did over a run (all 0 without it).
struct SpeculativeTotals {
  int64_t num_verifications = 0;  // (decoding sequence, step) pairs, drafts or not
  int64_t drafted_tokens = 0;     // draft tokens verified
  int64_t accepted_tokens = 0;    // of which accepted
  int64_t committed_tokens = 0;   // accepted + one per verification
  // Per draft position i: verifications that reached it (drafts 1..i - 1 accepted and the
  // sequence drafted i tokens or more), and of those, how many accepted draft i.
  std::vector<int64_t> position_offered, position_accepted;
  // Per request domain (Domain): verifications and committed tokens.
  std::array<int64_t, kNumDomains> verifications_by_domain{}, committed_by_domain{};
  SimTime draft_ns = 0;  // time of the draft passes, summed over steps (StepResult::draft_ns)
  SimTime step_ns = 0;   // duration of every step, summed (the draft share's denominator)
  // Draft model on GPUs of its own (SpeculativeSpec::draft_gpus): their busy time in draft
  // passes and their time in steps (draft GPUs x step durations), summed over steps.
  SimTime draft_gpu_busy_ns = 0;
  SimTime draft_gpu_step_ns = 0;
};

// Accepted drafts of one verification of `num_drafts` drafts (0 <= num_drafts <=
// acceptance.size()): draft i is accepted when a uniform draw from `rng` is below
// acceptance[i - 1]; the first rejection ends the draws (draws taken: accepted + 1, or
// num_drafts when all are accepted).
int32_t draw_accepted_drafts(std::span<const double> acceptance, int32_t num_drafts,
                             RngStream& rng);

// The acceptance draws of one run, with their totals.
class DraftAcceptance {
 public:
  // `rng` must outlive this object.
  DraftAcceptance(const SpeculativeSpec& spec, RngStream* rng);

  // One verification of `num_drafts` drafts (0..k): the accepted count, counted in totals().
  int32_t verify(int32_t num_drafts, Domain domain = Domain::kChat);
  // Adds one step's duration and its draft passes' time.
  void add_step(SimTime step_ns, SimTime draft_ns);
  // Adds one step's busy time of the draft GPUs (summed) and their time in it (GPUs x duration).
  void add_draft_gpus(SimTime busy_ns, SimTime step_ns);
  const SpeculativeTotals& totals() const { return totals_; }

 private:
  std::vector<double> acceptance_;
  std::array<std::vector<double>, kNumDomains> by_domain_;  // empty: acceptance_
  RngStream& rng_;
  SpeculativeTotals totals_;
};

// Draft tokens a decoding sequence with `remaining_tokens` (>= 1) still to produce proposes in
// one step: min(k, remaining_tokens - 1).
int64_t drafts_for(int32_t num_draft_tokens, int64_t remaining_tokens);

// The MTP modules on one GPU: their weights and the KV bytes per token their attention keeps.
struct DraftMemory {
  double weight_bytes = 0;
  double kv_bytes_per_token = 0;
};
// Each MTP module is the card's last layer (attention split over `attention_tp` GPUs like the
// model's, its routed experts spread over the replica like a MoE layer's, `slots_per_moe_layer`
// on this GPU), its embedding / hidden-state norms and its 2h -> h projection; embedding and
// output head are shared with the model (mtp_params in sim/model/model_card.h counts the same).
DraftMemory mtp_draft_memory(const ModelCard& card, int32_t attention_tp,
                             int64_t slots_per_moe_layer);
// A co-located draft model on one GPU: all of its weights (every GPU holds the whole model) and
// its KV bytes per token (every layer).
DraftMemory draft_model_memory(const ModelCard& draft);
// The draft memory of `spec` on one GPU of the target `card` (zero without speculation).
DraftMemory draft_memory(const SpeculativeSpec& spec, const ModelCard& card, int32_t attention_tp,
                         int64_t slots_per_moe_layer);

}  // namespace moesim::sim
