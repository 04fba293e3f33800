// Long-context cap: a request whose prompt exceeds `threshold_tokens` is
//   - rejected (action "reject:long_context"),
//   - summarised to `summary_tokens` (default: the threshold) before serving: a preprocessing
//     delay of prompt_tokens / preprocess_tokens_per_s (reading the long input), and the
//     summary is new content (fresh prefix-block hashes, no re-used prefix),
//   - routed to a separate long-context pool ([[deployment.pools]]), or
//   - sent to an offline batch queue: the pool `pool`, released at the next multiple of
//     `batch_interval_s` of simulated time.
// Shorter requests are untouched (they go to `short_pool` when given, else the default pool).
//
// Expected long-range accuracy: an accuracy-versus-context table (an INPUT, interpolated
// linearly in log2(context) and flat beyond its ends) is evaluated at the prompt each request
// actually presents (after summarising, times summary_accuracy_factor); at the end the run
// reports the mean, p10, p50 and count over completed requests
// ("long_context_cap.expected_accuracy_*"). The default table holds two published anchor
// points: about 94% at 32K tokens and about 33% at 512K. docs/policies/long_context_cap.md.
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
  void on_arrival(PolicyContext& ctx, Request& request, AdmissionDecision& decision) override;
  // Moves the completed request's expected accuracy into the distribution.
  void on_complete(PolicyContext& ctx, const Request& request,
                   const RequestRecord& record) override;
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
