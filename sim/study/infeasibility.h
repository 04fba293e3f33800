// Which requests can never meet which SLO limit, whatever the rate: the search's diagnosis before
// it probes a configuration. Each of the workload's requests at the configuration's own rate is
// priced alone on an idle replica by the project's own step model (built by ReplicaBuilder as the
// cluster builds its replicas): isolated prefill bounds its TTFT from below, one isolated decode
// step its TPOT, and its context or KV need may reject it at any rate. A percentile limit is
// infeasible when too many requests' bounds exceed it, an attainment limit when too many requests
// can never meet theirs. The bounds, the rules per limit and the sampling above 10,000 requests:
// docs/sweeps.md, "Diagnosis before the probes".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/study/slo_limits.h"

namespace moesim::sim::study {

// One request's bounds (see the file comment).
struct RequestBound {
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cached_tokens = 0;  // best case of the prefix cache
  std::string rejected;       // "context_too_long", "kv_capacity" or "" (admitted)
  double prefill_ms = 0;      // isolated prefill (0 when rejected)
  double decode_ms = 0;       // isolated decode step (0 when rejected or with one output token)
};

// The bounds of the scenario's requests under root seed `seed` (see the file comment), in
// arrival order, sampled above 10,000 requests. `where` is set to the attention rank and replica
// they were priced on, for messages.
std::vector<RequestBound> request_bounds(const Scenario& scenario, uint64_t seed,
                                         std::string* where = nullptr);

// One limit's finding.
struct LimitFinding {
  std::string limit;         // "ttft_p99_ms<=5000", "attainment>=0.99"
  int64_t num_affected = 0;  // requests that can never meet it
  int64_t num_counted = 0;   // requests it is counted over
  bool infeasible = false;   // no rate meets the limit
  std::string text;          // what and why, e.g. "17.2% of requests (58 of 339) need more ..."
};

struct Diagnosis {
  bool done = false;  // false: not diagnosed (a configuration that did not parse)
  int64_t num_requests = 0;
  int64_t num_context_too_long = 0, num_kv_capacity = 0;
  int64_t longest_prompt_tokens = 0;
  double longest_prefill_ms = 0;       // the isolated prefill of that prompt
  std::string where;                   // the rank and replica the bounds were priced on
  std::vector<LimitFinding> findings;  // limits with affected requests, in limit order
  bool infeasible() const;
  // "" when no limit is infeasible, else "infeasible at any rate: " and the infeasible
  // findings' texts joined by "; ".
  std::string verdict() const;
};

// The diagnosis of `bounds` under `slo`, with per-request limits `ttft_limit_ms`, `tpot_limit_ms`
// (the search's, or the scenario's [slo]).
Diagnosis diagnose(const std::vector<RequestBound>& bounds, const SearchSlo& slo,
                   double ttft_limit_ms, double tpot_limit_ms, const std::string& where);
// request_bounds + diagnose with the search's per-request limits (default the scenario's).
Diagnosis diagnose_scenario(const Scenario& scenario, const SearchSlo& slo, uint64_t seed);

}  // namespace moesim::sim::study
