#include "sim/policy/long_context_cap.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/check.h"
#include "sim/core/horizon.h"

namespace moesim::sim {
namespace {

// For the HorizonError of an admission delay past the horizon (sim/core/horizon.h).
constexpr const char* kDelayWhat = "policies.long_context_cap: the request's admission delay";

// Linear interpolation between closest ranks of sorted values (as percentiles()).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

LongContextCapPolicy::LongContextCapPolicy(LongContextCapParams params)
    : params_(std::move(params)) {
  const auto& x = params_.accuracy_context_tokens;
  MOESIM_CHECK(!x.empty() && x.size() == params_.accuracy.size(), "accuracy table shape");
  for (size_t i = 0; i < x.size(); ++i) {
    MOESIM_CHECK(x[i] >= 1 && (i == 0 || x[i] > x[i - 1]), "accuracy table context order");
    MOESIM_CHECK(params_.accuracy[i] >= 0 && params_.accuracy[i] <= 1, "accuracy out of [0, 1]");
    log2_tokens_.push_back(std::log2(x[i]));
  }
  MOESIM_CHECK(params_.threshold_tokens >= 1, "threshold below 1 token");
}

double LongContextCapPolicy::expected_accuracy(double context_tokens) const {
  MOESIM_CHECK(context_tokens > 0, "accuracy of an empty context");
  const double l = std::log2(context_tokens);
  const auto& a = params_.accuracy;
  if (l <= log2_tokens_.front()) return a.front();
  if (l >= log2_tokens_.back()) return a.back();
  const size_t hi = static_cast<size_t>(
      std::upper_bound(log2_tokens_.begin(), log2_tokens_.end(), l) - log2_tokens_.begin());
  const size_t lo = hi - 1;
  const double f = (l - log2_tokens_[lo]) / (log2_tokens_[hi] - log2_tokens_[lo]);
  return a[lo] + (a[hi] - a[lo]) * f;
}

void LongContextCapPolicy::on_arrival(PolicyContext& ctx, Request& request,
                                      AdmissionDecision& decision) {
  if (request.prompt_tokens <= params_.threshold_tokens) {
    if (!params_.short_pool.empty()) decision.pool = params_.short_pool;
    pending_accuracy_[request.id.value] =
        expected_accuracy(static_cast<double>(request.prompt_tokens));
    return;
  }
  ++num_over_;
  ctx.actions.count_action("long_context_over");
  switch (params_.action) {
    case LongContextAction::kReject:
      decision.reject = true;
      decision.reject_reason = "long_context";
      return;
    case LongContextAction::kSummarize: {
      const double read_s =
          static_cast<double>(request.prompt_tokens) / params_.preprocess_tokens_per_s;
      const SimTime read_ns = checked_duration_ns(
          read_s,
          "policies.long_context_cap: reading a prompt of " +
              std::to_string(request.prompt_tokens) + " tokens at preprocess_tokens_per_s = " +
              format_number(params_.preprocess_tokens_per_s),
          "raise preprocess_tokens_per_s");
      decision.delay_ns = add_within_horizon(decision.delay_ns, read_ns, kDelayWhat);
      rewrite_prompt(request, params_.summary_tokens, 0, {}, 0, hashes_);
      if (!params_.short_pool.empty()) decision.pool = params_.short_pool;
      ctx.actions.count_action("long_context_summarize");
      pending_accuracy_[request.id.value] =
          expected_accuracy(static_cast<double>(request.prompt_tokens)) *
          params_.summary_accuracy_factor;
      return;
    }
    case LongContextAction::kRoute:
      decision.pool = params_.pool;
      ctx.actions.count_action("long_context_route");
      break;
    case LongContextAction::kOffline: {
      const SimTime interval_ns = from_seconds(params_.batch_interval_s);
      const SimTime release_ns = (ctx.view.now() / interval_ns + 1) * interval_ns;
      decision.pool = params_.pool;
      decision.delay_ns =
          add_within_horizon(decision.delay_ns, release_ns - ctx.view.now(), kDelayWhat);
      ctx.actions.count_action("long_context_offline");
      break;
    }
  }
  pending_accuracy_[request.id.value] =
      expected_accuracy(static_cast<double>(request.prompt_tokens));
}

void LongContextCapPolicy::on_complete(PolicyContext& ctx, const Request& request,
                                       const RequestRecord& record) {
  auto it = pending_accuracy_.find(request.id.value);
  if (it == pending_accuracy_.end()) return;
  accuracies_.push_back(it->second);
  pending_accuracy_.erase(it);
}

void LongContextCapPolicy::on_reject(PolicyContext& ctx, const Request& request) {
  pending_accuracy_.erase(request.id.value);
}

void LongContextCapPolicy::on_finish(PolicyContext& ctx) {
  std::vector<double> sorted = accuracies_;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double a : sorted) sum += a;
  const std::string p = "long_context_cap.";
  ctx.actions.report_metric(p + "expected_accuracy_count", static_cast<double>(sorted.size()));
  ctx.actions.report_metric(p + "expected_accuracy_mean",
                            sorted.empty() ? 0.0 : sum / static_cast<double>(sorted.size()));
  ctx.actions.report_metric(p + "expected_accuracy_p10", quantile(sorted, 0.10));
  ctx.actions.report_metric(p + "expected_accuracy_p50", quantile(sorted, 0.50));
  ctx.actions.report_metric(p + "requests_over_threshold", static_cast<double>(num_over_));
}

std::unique_ptr<ServingPolicy> make_long_context_cap_policy(TomlTable& table,
                                                            const Scenario& scenario) {
  LongContextCapParams p;
  p.threshold_tokens =
      table.get_int_in_or("threshold_tokens", 1, int64_t{1} << 40, p.threshold_tokens);
  const std::string action =
      table.get_enum_or("action", {"reject", "summarize", "route", "offline"}, "reject");
  p.action = action == "reject"      ? LongContextAction::kReject
             : action == "summarize" ? LongContextAction::kSummarize
             : action == "route"     ? LongContextAction::kRoute
                                     : LongContextAction::kOffline;
  auto declared_pool = [&](std::string_view key, const std::string& name) {
    std::string declared;
    for (const PoolSpec& pool : scenario.deployment.pools) {
      if (pool.name == name) return;
      declared += (declared.empty() ? "" : ", ") + pool.name;
    }
    table.fail(key, "pool '" + name + "' is not declared in [[deployment.pools]] (declared: " +
                        (declared.empty() ? "none" : declared) + ")");
  };
  if (p.action == LongContextAction::kSummarize) {
    p.summary_tokens =
        table.get_int_in_or("summary_tokens", 1, p.threshold_tokens, p.threshold_tokens);
    p.preprocess_tokens_per_s =
        table.get_double_in_or("preprocess_tokens_per_s", 1e-3, 1e15, p.preprocess_tokens_per_s);
    p.summary_accuracy_factor =
        table.get_double_in_or("summary_accuracy_factor", 1e-9, 1.0, p.summary_accuracy_factor);
  }
  if (p.action == LongContextAction::kRoute || p.action == LongContextAction::kOffline) {
    p.pool = table.get_string("pool");
    declared_pool("pool", p.pool);
  }
  if (p.action == LongContextAction::kOffline) {
    p.batch_interval_s = table.get_double_in_or("batch_interval_s", 1e-6, 1e7, p.batch_interval_s);
  }
  if (auto s = table.find_string("short_pool")) {
    declared_pool("short_pool", *s);
    if (*s == p.pool) table.fail("short_pool", "must differ from pool ('" + p.pool + "')");
    p.short_pool = *s;
  } else if (!scenario.deployment.pools.empty()) {
    table.fail_table(
        "short_pool is required when [[deployment.pools]] are declared (the pool "
        "of requests at or under the threshold)");
  }
  auto tokens = table.find_double_array("accuracy_context_tokens");
  auto accuracy = table.find_double_array("accuracy");
  if (tokens.has_value() != accuracy.has_value()) {
    table.fail(tokens ? "accuracy" : "accuracy_context_tokens",
               "give both accuracy_context_tokens and accuracy, or neither");
  }
  if (tokens) {
    if (tokens->empty()) table.fail("accuracy_context_tokens", "needs at least one point");
    if (tokens->size() != accuracy->size()) {
      table.fail("accuracy", "has " + std::to_string(accuracy->size()) + " values, " +
                                 "accuracy_context_tokens has " + std::to_string(tokens->size()));
    }
    for (size_t i = 0; i < tokens->size(); ++i) {
      if ((*tokens)[i] < 1 || (i > 0 && (*tokens)[i] <= (*tokens)[i - 1])) {
        table.fail("accuracy_context_tokens", "must be >= 1 and strictly increasing");
      }
      if ((*accuracy)[i] < 0 || (*accuracy)[i] > 1) {
        table.fail("accuracy", "values must lie in [0, 1]");
      }
    }
    p.accuracy_context_tokens = *tokens;
    p.accuracy = *accuracy;
  }
  return std::make_unique<LongContextCapPolicy>(std::move(p));
}

}  // namespace moesim::sim
