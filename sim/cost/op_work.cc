#include "sim/cost/op_work.h"

namespace moesim::sim {
namespace {

constexpr std::string_view kNames[kNumOpKinds] = {
    "rmsnorm",         "attn_mla_prefill", "attn_mla_decode", "attn_gqa_prefill",
    "attn_gqa_decode", "attn_kda_prefill", "attn_kda_decode", "router",
    "permute",         "expert_ffn",       "shared_expert",   "dense_ffn",
    "combine",         "lm_head",          "dispatch_a2a",    "combine_a2a"};

}  // namespace

std::string_view op_kind_name(OpKind kind) { return kNames[static_cast<int>(kind)]; }

std::optional<OpKind> op_kind_from_name(std::string_view name) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (kNames[i] == name) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

}  // namespace moesim::sim
