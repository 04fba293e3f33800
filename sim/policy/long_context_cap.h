// Long-context cap: a request whose prompt exceeds `threshold_tokens` is rejected, summarised
// before serving (a reading delay, and the summary is new content), routed to a long-context
// pool, or sent to an offline batch queue; shorter requests are untouched.
//
// The run also reports the expected long-range accuracy of completed requests, from an input
// table of accuracy against context (interpolated in log2(context)) evaluated at the prompt each
// request actually presents. docs/policies/long_context_cap.md has the actions, the keys and
// the default table's published anchor points.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/policy/prompt_rewrite.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim {

enum class LongContextAction { kReject, kSummarize, kRoute, kOffline };

struct LongContextCapParams {
  int64_t threshold_tokens = 131072;  // prompts > this are acted on, >= 1
  LongContextAction action = LongContextAction::kReject;
  // kSummarize: target prompt length (<= threshold; default the threshold) and the reading
  // rate of the summariser.
  int64_t summary_tokens = 131072;
  double preprocess_tokens_per_s = 20000;
  double summary_accuracy_factor = 1.0;  // in (0, 1]: accuracy kept by summarising
  // kRoute / kOffline: the pool of long requests; short_pool: the pool of the others ("" =
  // default pool).
  std::string pool;
  std::string short_pool;
  double batch_interval_s = 60;  // kOffline: batch windows, > 0
  // Accuracy table: context tokens strictly increasing (>= 1) and accuracies in [0, 1].
  std::vector<double> accuracy_context_tokens = {32768, 524288};
  std::vector<double> accuracy = {0.94, 0.33};
};

class LongContextCapPolicy final : public ServingPolicy {
 public:
  // Preconditions (checked): the table is well formed (as the parser validates).
  explicit LongContextCapPolicy(LongContextCapParams params);
  std::string_view name() const override { return "long_context_cap"; }
  const LongContextCapParams& params() const { return params_; }
  void on_arrival(PolicyContext& ctx, Request& request, AdmissionDecision& decision) override;
  // Moves the completed request's expected accuracy into the distribution.
  void on_complete(PolicyContext& ctx, const Request& request,
                   const RequestRecord& record) override;
  // Drops a rejected request's expected accuracy (it never completes).
  void on_reject(PolicyContext& ctx, const Request& request) override;
  // Reports the expected-accuracy distribution (completed requests) and the count of requests
  // over the threshold.
  void on_finish(PolicyContext& ctx) override;

  // Expected accuracy at `context_tokens` (> 0) from the table.
  double expected_accuracy(double context_tokens) const;

 private:
  LongContextCapParams params_;
  std::vector<double> log2_tokens_;
  std::map<int32_t, double> pending_accuracy_;  // request id -> accuracy, until it completes
  std::vector<double> accuracies_;              // one per completed request
  PolicyHashStream hashes_{2};                  // fresh prefix-block hashes for summaries
  int64_t num_over_ = 0;
};

// Parses [policies.long_context_cap] (pools checked against [[deployment.pools]]).
std::unique_ptr<ServingPolicy> make_long_context_cap_policy(TomlTable& table,
                                                            const Scenario& scenario);

}  // namespace moesim::sim
