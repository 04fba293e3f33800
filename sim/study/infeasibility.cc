#include "sim/study/infeasibility.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "sim/core/rng.h"
#include "sim/metrics/figure_text.h"
#include "sim/serving/replica_builder.h"
#include "sim/workload/workload_generator.h"

namespace moesim::sim::study {
namespace {

constexpr size_t kMaxPricedRequests = 10000;

std::string percent_text(int64_t k, int64_t n) {
  const double pct = n > 0 ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0;
  char buf[32];
  std::snprintf(buf, sizeof(buf), pct < 0.1 ? "%.2g%%" : "%.1f%%", pct);
  return buf;
}

// "850 ms", "5 s", "29.1 s".
std::string duration_text(double ms) {
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%.3g ms", ms);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g s", ms / 1e3);
  }
  return buf;
}

std::string count_of(int64_t k, int64_t n, const char* what) {
  return percent_text(k, n) + " of " + what + " (" + std::to_string(k) + " of " +
         std::to_string(n) + ")";
}

// The q of a percentile limit's name ("ttft_p99_ms" -> 0.99).
double quantile_of(const std::string& name) {
  const std::string p = name.substr(name.find('_') + 2, 2);
  return std::stod(p) / 100.0;
}

// Step durations of one sequence alone on rank 0 of a replica's step model, by slice.
class IsolatedSteps {
 public:
  explicit IsolatedSteps(StepModel& model) : model_(model) {}
  SimTime step_ns(const SeqSlice& slice) {
    const auto key = std::make_tuple(slice.new_tokens, slice.context_tokens, slice.prefill);
    const auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    std::vector<std::vector<SeqSlice>> ranks(static_cast<size_t>(model_.num_ranks()));
    ranks[0] = {slice};
    // Step 0 for every slice: synthetic routing depends on (seed, layer, step, tokens) only, so
    // a slice's duration does not depend on which slices were priced before it.
    const SimTime ns = model_.run(0, ranks, nullptr).duration_ns;
    memo_.emplace(key, ns);
    return ns;
  }

 private:
  StepModel& model_;
  std::map<std::tuple<int64_t, int64_t, bool>, SimTime> memo_;
};

}  // namespace

bool Diagnosis::infeasible() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const LimitFinding& f) { return f.infeasible; });
}

std::string Diagnosis::verdict() const {
  std::string out;
  for (const LimitFinding& f : findings) {
    if (!f.infeasible) continue;
    out += (out.empty() ? "infeasible at any rate: " : "; ") + f.limit + ": " + f.text;
  }
  return out;
}

std::vector<RequestBound> request_bounds(const Scenario& sc, uint64_t seed, std::string* where) {
  const DeploymentSpec& d = sc.deployment;
  const SchedulerSpec& sched = sc.scheduler;
  const ReplicaBuilder builder(sc);
  // Under P/D the first prefill_replicas replicas prefill and the others decode; every replica
  // has the same shape, so replica 0 and the first decode replica stand for their pools.
  ReplicaParts prefill = builder.build(0, seed);
  std::optional<ReplicaParts> decode_parts;
  if (d.prefill_replicas > 0) decode_parts = builder.build(d.prefill_replicas, seed);
  ReplicaParts& decode = decode_parts ? *decode_parts : prefill;
  const GpuMemoryLayout layout = builder.memory_layout(
      *sc.model, prefill.placements.get(), "deployment",
      sc.model->name + " on " + builder.topology().gpu_spec().name + " with " +
          std::to_string(d.gpus_per_replica) + " GPUs per replica");
  if (where) {
    const int32_t ranks = prefill.step_model->num_ranks();
    *where = "one attention rank (" + std::to_string(d.gpus_per_replica / ranks) + " GPU" +
             (d.gpus_per_replica / ranks == 1 ? "" : "s") + ") of " +
             (d.prefill_replicas > 0 ? "a prefill replica" : "a replica") + " of " +
             std::to_string(d.gpus_per_replica) + " GPUs (" + std::to_string(ranks) +
             " attention ranks)";
  }

  // Every open-loop request arriving within the run, with its best-case prefix hits and whether
  // it is rejected on arrival.
  RngStream rng(seed, "workload");
  WorkloadGenerator generator(sc.workload, rng);
  const SimTime end_ns = from_seconds(sc.run.duration_s);
  std::unordered_set<uint64_t> seen;  // block hashes of earlier requests (lookups only)
  std::vector<RequestBound> all;
  while (std::optional<Request> r = generator.next()) {
    if (r->arrival_ns >= end_ns) break;
    RequestBound b;
    b.prompt_tokens = r->prompt_tokens;
    b.output_tokens = r->output_tokens;
    if (sched.prefix_caching) {
      const auto& h = r->prefix_block_hashes;
      const int64_t max_blocks = (r->prompt_tokens - 1) / kPrefixBlockTokens;
      int64_t n = 0;
      while (n < max_blocks && n < static_cast<int64_t>(h.size()) && seen.count(h[n]) > 0) ++n;
      b.cached_tokens = n * kPrefixBlockTokens;
      seen.insert(h.begin(), h.end());
    }
    // prompt + output over the context, without overflowing (trace rows may hold any int64).
    if (r->prompt_tokens > sc.model->max_context_tokens - r->output_tokens) {
      b.rejected = "context_too_long";
    } else if (blocks_for_sequence(layout, r->prompt_tokens + r->output_tokens,
                                   sched.kv_block_tokens) > layout.num_kv_blocks) {
      b.rejected = "kv_capacity";
    }
    all.push_back(b);
  }
  std::vector<RequestBound> bounds;
  const size_t stride = (all.size() + kMaxPricedRequests - 1) / kMaxPricedRequests;
  for (size_t i = 0; i < all.size(); i += std::max<size_t>(stride, 1)) bounds.push_back(all[i]);

  IsolatedSteps prefill_steps(*prefill.step_model);
  IsolatedSteps decode_steps(*decode.step_model);
  const int64_t budget = sched.max_batch_tokens_per_gpu;
  for (RequestBound& b : bounds) {
    if (!b.rejected.empty()) continue;
    SimTime ns = 0;
    for (int64_t done = b.cached_tokens; done < b.prompt_tokens;) {
      const int64_t chunk = std::min(b.prompt_tokens - done, budget);
      ns += prefill_steps.step_ns(SeqSlice{chunk, done, true});
      done += chunk;
    }
    b.prefill_ms = to_ms(ns);
    if (b.output_tokens >= 2) {
      const int64_t context = b.prompt_tokens / kPrefixBlockTokens * kPrefixBlockTokens;
      b.decode_ms = to_ms(decode_steps.step_ns(SeqSlice{1, context, false}));
    }
  }
  return bounds;
}

Diagnosis diagnose(const std::vector<RequestBound>& bounds, const SearchSlo& slo,
                   double ttft_limit_ms, double tpot_limit_ms, const std::string& where) {
  Diagnosis dg;
  dg.done = true;
  dg.where = where;
  dg.num_requests = static_cast<int64_t>(bounds.size());
  for (const RequestBound& b : bounds) {
    dg.num_context_too_long += b.rejected == "context_too_long" ? 1 : 0;
    dg.num_kv_capacity += b.rejected == "kv_capacity" ? 1 : 0;
    if (b.rejected.empty() && b.prompt_tokens > dg.longest_prompt_tokens) {
      dg.longest_prompt_tokens = b.prompt_tokens;
      dg.longest_prefill_ms = b.prefill_ms;
    }
  }
  const std::string longest = "; the longest prompt, " + std::to_string(dg.longest_prompt_tokens) +
                              " tokens, needs " + duration_text(dg.longest_prefill_ms);

  for (const SearchSlo::Limit& l : slo.percentile_limits) {
    const std::string metric = l.name.substr(0, l.name.find('_'));
    if (metric == "queueing") continue;  // no bound: a request alone does not queue
    int64_t n = 0, k = 0;
    for (const RequestBound& b : bounds) {
      if (!b.rejected.empty() || (metric == "tpot" && b.output_tokens < 2)) continue;
      const double bound =
          metric == "ttft" ? b.prefill_ms
          : metric == "tpot"
              ? b.decode_ms
              : b.prefill_ms + static_cast<double>(b.output_tokens - 1) * b.decode_ms;
      ++n;
      k += bound > l.limit_ms ? 1 : 0;
    }
    if (k == 0) continue;
    LimitFinding f;
    f.limit = l.name + "<=" + number_text(l.limit_ms);
    f.num_affected = k;
    f.num_counted = n;
    const double q = quantile_of(l.name);
    f.infeasible = static_cast<int64_t>(std::floor(q * static_cast<double>(n - 1))) >= n - k;
    const std::string what = metric == "ttft"   ? "of isolated prefill on " + where + longest
                             : metric == "tpot" ? "per decode step alone on a decode rank"
                                                : "end to end alone (isolated prefill + decode)";
    f.text = count_of(k, n, "admitted requests") + " need more than " + duration_text(l.limit_ms) +
             " " + what +
             (f.infeasible ? ": its p" + l.name.substr(l.name.find('_') + 2, 2) +
                                 " exceeds the limit at any rate"
                           : ": fewer than the percentile allows");
    dg.findings.push_back(std::move(f));
  }

  int64_t slow_prefill = 0, slow_decode = 0, rejected = 0, doomed = 0;
  for (const RequestBound& b : bounds) {
    const bool rej = !b.rejected.empty();
    const bool pre = !rej && b.prefill_ms > ttft_limit_ms;
    const bool dec = !rej && !pre && b.output_tokens >= 2 && b.decode_ms > tpot_limit_ms;
    rejected += rej ? 1 : 0;
    slow_prefill += pre ? 1 : 0;
    slow_decode += dec ? 1 : 0;
    doomed += rej || pre || dec ? 1 : 0;
  }
  if (doomed > 0) {
    LimitFinding f;
    f.limit = "attainment>=" + number_text(slo.min_attainment) +
              " (ttft_ms<=" + number_text(ttft_limit_ms) +
              ", tpot_ms<=" + number_text(tpot_limit_ms) + ")";
    f.num_affected = doomed;
    f.num_counted = dg.num_requests;
    const int64_t best_met = dg.num_requests - doomed;
    f.infeasible =
        static_cast<double>(best_met) < slo.min_attainment * static_cast<double>(dg.num_requests);
    std::string why;
    auto add = [&](int64_t count, const std::string& text) {
      if (count > 0) why += (why.empty() ? "" : ", ") + std::to_string(count) + " " + text;
    };
    add(slow_prefill, "need more than " + duration_text(ttft_limit_ms) + " of isolated prefill");
    add(slow_decode, "need more than " + duration_text(tpot_limit_ms) + " per decode step alone");
    add(dg.num_context_too_long, "exceed the model's context (context_too_long)");
    add(dg.num_kv_capacity, "cannot fit one rank's KV pool (kv_capacity)");
    f.text = count_of(doomed, dg.num_requests, "requests") + " can never meet their limits (" +
             why + "): attainment at most " + percent_text(best_met, dg.num_requests) +
             (f.infeasible ? " at any rate" : "");
    dg.findings.push_back(std::move(f));
  }
  return dg;
}

Diagnosis diagnose_scenario(const Scenario& scenario, const SearchSlo& slo, uint64_t seed) {
  std::string where;
  const std::vector<RequestBound> bounds = request_bounds(scenario, seed, &where);
  return diagnose(bounds, slo, slo.request_ttft_ms.value_or(scenario.slo.ttft_ms),
                  slo.request_tpot_ms.value_or(scenario.slo.tpot_ms), where);
}

}  // namespace moesim::sim::study
