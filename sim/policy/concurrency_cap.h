// Concurrency cap per expert-parallel replica: at most `max_seqs_per_replica` sequences in
// flight and/or `max_step_tokens_per_replica` tokens in one step (all attention ranks of the
// replica together); the cluster-wide concurrency is replicas x cap.
//
// Why a small cap can win when the all-to-all dominates: a step's dispatch and combine carry
// bytes proportional to its tokens and every MoE layer ends at the slowest GPU's barrier, so
// fewer sequences per step mean a shorter step and a lower TPOT, at the cost of queueing (higher
// TTFT once the cap binds). docs/policies/concurrency_cap.md has the keys and the measurements.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "sim/config/toml_source.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim {

struct ConcurrencyCapParams {
  int32_t max_seqs_per_replica = 0;         // >= 0; 0 keeps the scheduler's max_seqs
  int64_t max_step_tokens_per_replica = 0;  // >= 0; 0 keeps the per-GPU token budgets only
};

class ConcurrencyCapPolicy final : public ServingPolicy {
 public:
  // Precondition (checked): at least one limit > 0.
  explicit ConcurrencyCapPolicy(ConcurrencyCapParams params);
  std::string_view name() const override { return "concurrency_cap"; }
  // Sets the limits on every replica (action "cap_set", once per replica) and reports the
  // per-replica and cluster-wide caps as metrics.
  void on_start(PolicyContext& ctx) override;

  const ConcurrencyCapParams& params() const { return params_; }

 private:
  ConcurrencyCapParams params_;
};

// Parses [policies.concurrency_cap] (the registry calls table.finish()).
std::unique_ptr<ServingPolicy> make_concurrency_cap_policy(TomlTable& table,
                                                           const Scenario& scenario);

}  // namespace moesim::sim
