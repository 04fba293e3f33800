#include "sim/policy/queue_isolation.h"

#include "base/check.h"
#include "sim/metrics/run_metrics.h"

namespace moesim::sim {
namespace {

constexpr std::array<const char*, 2> kClassNames = {"short", "long"};

}  // namespace

QueueIsolationPolicy::QueueIsolationPolicy(QueueIsolationParams params)
    : params_(std::move(params)) {
  MOESIM_CHECK(params_.long_threshold_tokens >= 1, "long threshold below 1 token");
  MOESIM_CHECK(!params_.isolate || (!params_.short_pool.empty() && !params_.long_pool.empty()),
               "isolation without pools");
}

void QueueIsolationPolicy::on_arrival(PolicyContext& ctx, Request& request,
                                      AdmissionDecision& decision) {
  const Class c = class_of(request.prompt_tokens);
  ctx.actions.count_action(c == kShort ? "class_short" : "class_long");
  if (params_.isolate) decision.pool = c == kShort ? params_.short_pool : params_.long_pool;
}

void QueueIsolationPolicy::on_complete(PolicyContext& ctx, const Request& request,
                                       const RequestRecord& record) {
  if (record.ttft_ns() < 0) return;
  ttft_ms_[class_of(request.prompt_tokens)].push_back(static_cast<double>(record.ttft_ns()) / 1e6);
}

void QueueIsolationPolicy::on_finish(PolicyContext& ctx) {
  for (int32_t c = 0; c < 2; ++c) {
    const std::string prefix = std::string("queue_isolation.") + kClassNames[c] + ".";
    const Percentiles p = percentiles(ttft_ms_[c]);
    ctx.actions.report_metric(prefix + "completed", static_cast<double>(p.count));
    ctx.actions.report_metric(prefix + "ttft_p50_ms", p.p50);
    ctx.actions.report_metric(prefix + "ttft_p99_ms", p.p99);
  }
}

std::unique_ptr<ServingPolicy> make_queue_isolation_policy(TomlTable& table,
                                                           const Scenario& scenario) {
  QueueIsolationParams p;
  p.long_threshold_tokens =
      table.get_int_in_or("long_threshold_tokens", 1, int64_t{1} << 40, p.long_threshold_tokens);
  p.isolate = table.get_bool_or("isolate", p.isolate);
  if (p.isolate) {
    auto check_pool = [&](std::string_view key) {
      std::string name = table.get_string(key);
      std::string declared;
      for (const PoolSpec& pool : scenario.deployment.pools) {
        if (pool.name == name) return name;
        declared += (declared.empty() ? "" : ", ") + pool.name;
      }
      table.fail(key, "pool '" + name + "' is not declared in [[deployment.pools]] (declared: " +
                          (declared.empty() ? "none" : declared) + ")");
    };
    p.short_pool = check_pool("short_pool");
    p.long_pool = check_pool("long_pool");
    if (p.short_pool == p.long_pool) {
      table.fail("long_pool", "must differ from short_pool ('" + p.short_pool + "')");
    }
  }
  return std::make_unique<QueueIsolationPolicy>(std::move(p));
}

}  // namespace moesim::sim
