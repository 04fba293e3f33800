#include "sim/policy/concurrency_cap.h"

#include "base/check.h"

namespace moesim::sim {

ConcurrencyCapPolicy::ConcurrencyCapPolicy(ConcurrencyCapParams params) : params_(params) {
  MOESIM_CHECK(params_.max_seqs_per_replica >= 0 && params_.max_step_tokens_per_replica >= 0,
               "negative concurrency cap");
  MOESIM_CHECK(params_.max_seqs_per_replica > 0 || params_.max_step_tokens_per_replica > 0,
               "concurrency cap sets no limit");
}

void ConcurrencyCapPolicy::on_start(PolicyContext& ctx) {
  const int32_t num_replicas = ctx.view.num_replicas();
  for (int32_t r = 0; r < num_replicas; ++r) {
    ctx.actions.set_concurrency_limit(r, params_.max_seqs_per_replica,
                                      params_.max_step_tokens_per_replica);
    ctx.actions.count_action("cap_set");
  }
  if (params_.max_seqs_per_replica > 0) {
    ctx.actions.report_metric("concurrency_cap.max_seqs_per_replica", params_.max_seqs_per_replica);
    ctx.actions.report_metric("concurrency_cap.cluster_max_seqs",
                              static_cast<double>(params_.max_seqs_per_replica) * num_replicas);
  }
  if (params_.max_step_tokens_per_replica > 0) {
    ctx.actions.report_metric("concurrency_cap.max_step_tokens_per_replica",
                              static_cast<double>(params_.max_step_tokens_per_replica));
  }
}

std::unique_ptr<ServingPolicy> make_concurrency_cap_policy(TomlTable& table,
                                                           const Scenario& scenario) {
  ConcurrencyCapParams p;
  p.max_seqs_per_replica =
      static_cast<int32_t>(table.get_int_in_or("max_seqs_per_replica", 0, 1 << 20, 0));
  p.max_step_tokens_per_replica =
      table.get_int_in_or("max_step_tokens_per_replica", 0, int64_t{1} << 40, 0);
  if (p.max_seqs_per_replica == 0 && p.max_step_tokens_per_replica == 0) {
    table.fail_table(
        "sets no limit: give max_seqs_per_replica and/or max_step_tokens_per_replica > 0");
  }
  return std::make_unique<ConcurrencyCapPolicy>(p);
}

}  // namespace moesim::sim
