// Queue isolation: requests are classed by prompt length (short below long_threshold_tokens,
// long otherwise) and each class goes to its own replica pool ([[deployment.pools]]), so its own
// queues: a long prompt never sits in front of a short one, and long prefill chunks never share
// a step with short requests' decode. The cost: a burst of one class cannot borrow the other's
// capacity. With isolate = false the policy only classifies and measures (the shared-pool
// baseline), so one study compares the same per-class figures with and without isolation.
// docs/policies/queue_isolation.md has the keys and the metrics.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/toml_source.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/serving_policy.h"

namespace moesim::sim {

struct QueueIsolationParams {
  int64_t long_threshold_tokens = 8192;  // >= 1
  bool isolate = true;
  std::string short_pool;  // pools of the deployment (isolate only)
  std::string long_pool;
};

class QueueIsolationPolicy final : public ServingPolicy {
 public:
  enum Class : int32_t { kShort = 0, kLong = 1 };

  explicit QueueIsolationPolicy(QueueIsolationParams params);
  std::string_view name() const override { return "queue_isolation"; }
  const QueueIsolationParams& params() const { return params_; }
  // Classes the request (action "class_short" / "class_long") and, when isolating, sets its
  // pool.
  void on_arrival(PolicyContext& ctx, Request& request, AdmissionDecision& decision) override;
  // Records the completed request's TTFT under its class.
  void on_complete(PolicyContext& ctx, const Request& request,
                   const RequestRecord& record) override;
  // Reports per-class TTFT p50 / p99 (ms) and completions.
  void on_finish(PolicyContext& ctx) override;

  Class class_of(int64_t prompt_tokens) const {
    return prompt_tokens >= params_.long_threshold_tokens ? kLong : kShort;
  }

 private:
  QueueIsolationParams params_;
  std::array<std::vector<double>, 2> ttft_ms_;  // by class, completed requests
};

// Parses [policies.queue_isolation]; with isolate = true both pools must be declared in
// [[deployment.pools]] and differ.
std::unique_ptr<ServingPolicy> make_queue_isolation_policy(TomlTable& table,
                                                           const Scenario& scenario);

}  // namespace moesim::sim
