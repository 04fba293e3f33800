#include "sim/serving/speculative.h"

#include <algorithm>

#include "base/check.h"

namespace moesim::sim {

int32_t draw_accepted_drafts(std::span<const double> acceptance, int32_t num_drafts,
                             RngStream& rng) {
  MOESIM_CHECK(num_drafts >= 0 && num_drafts <= static_cast<int32_t>(acceptance.size()),
               "drafts beyond the acceptance table");
  int32_t accepted = 0;
  while (accepted < num_drafts && rng.uniform01() < acceptance[accepted]) ++accepted;
  return accepted;
}

DraftAcceptance::DraftAcceptance(const SpeculativeSpec& spec, RngStream* rng)
    : acceptance_(spec.acceptance), by_domain_(spec.acceptance_by_domain), rng_(*rng) {
  totals_.position_offered.assign(acceptance_.size(), 0);
  totals_.position_accepted.assign(acceptance_.size(), 0);
}

int32_t DraftAcceptance::verify(int32_t num_drafts, Domain domain) {
  const auto d = static_cast<size_t>(domain);
  const int32_t accepted =
      draw_accepted_drafts(by_domain_[d].empty() ? acceptance_ : by_domain_[d], num_drafts, rng_);
  totals_.verifications_by_domain[d]++;
  totals_.committed_by_domain[d] += accepted + 1;
  totals_.num_verifications++;
  totals_.drafted_tokens += num_drafts;
  totals_.accepted_tokens += accepted;
  totals_.committed_tokens += accepted + 1;
  // Positions 1..accepted were accepted; position accepted + 1 was reached and rejected.
  for (int32_t i = 0; i < std::min(accepted + 1, num_drafts); ++i) totals_.position_offered[i]++;
  for (int32_t i = 0; i < accepted; ++i) totals_.position_accepted[i]++;
  return accepted;
}

void DraftAcceptance::add_step(SimTime step_ns, SimTime draft_ns) {
  totals_.step_ns += step_ns;
  totals_.draft_ns += draft_ns;
}

void DraftAcceptance::add_draft_gpus(SimTime busy_ns, SimTime step_ns) {
  totals_.draft_gpu_busy_ns += busy_ns;
  totals_.draft_gpu_step_ns += step_ns;
}

int64_t drafts_for(int32_t num_draft_tokens, int64_t remaining_tokens) {
  MOESIM_CHECK(remaining_tokens >= 1, "a decoding sequence has a token to produce");
  return std::min<int64_t>(num_draft_tokens, remaining_tokens - 1);
}

DraftMemory mtp_draft_memory(const ModelCard& card, int32_t attention_tp,
                             int64_t slots_per_moe_layer) {
  MOESIM_CHECK(!card.layers.empty() && attention_tp >= 1, "an MTP module copies a layer");
  ModelCard last = card;
  last.layers = {card.layers.back()};
  last.num_mtp_layers = 0;
  const LayerSpec& layer = last.layers.front();
  const double tp = static_cast<double>(attention_tp);
  const double h = static_cast<double>(card.hidden_size);
  // Attention (split over TP), the layer's FFN (dense, or shared experts + router), its routed
  // expert slots on this GPU, and the 2h -> h projection with three norms at attention precision.
  double per_module = weight_bytes(last, TensorGroup::kAttention) / tp +
                      weight_bytes(last, TensorGroup::kDenseFfn) +
                      weight_bytes(last, TensorGroup::kSharedExperts) +
                      weight_bytes(last, TensorGroup::kRouter);
  if (layer.ffn.is_moe) {
    per_module +=
        expert_weight_bytes(card, layer.ffn.moe) * static_cast<double>(slots_per_moe_layer);
  }
  per_module += (2.0 * h * h + 3.0 * h) *
                weight_bits_per_element(card.precision, TensorGroup::kAttention) / 8.0 / tp;
  double kv = kv_bytes_per_token(layer.attention, card.precision.kv_cache);
  if (layer.attention.kind == AttentionKind::kGQA) {
    kv /= static_cast<double>(std::min<int64_t>(attention_tp, layer.attention.gqa.num_kv_heads));
  }
  const auto n = static_cast<double>(card.num_mtp_layers);
  return DraftMemory{n * per_module, n * kv};
}

DraftMemory draft_model_memory(const ModelCard& draft) {
  return DraftMemory{total_weight_bytes(draft), kv_bytes_per_token(draft)};
}

DraftMemory draft_memory(const SpeculativeSpec& spec, const ModelCard& card, int32_t attention_tp,
                         int64_t slots_per_moe_layer) {
  if (!spec.enabled) return {};
  if (spec.method == SpeculativeMethod::kDraftModel) return draft_model_memory(*spec.draft_model);
  return mtp_draft_memory(card, attention_tp, slots_per_moe_layer);
}

}  // namespace moesim::sim
