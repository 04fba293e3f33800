// Which requests can never meet which SLO limit, whatever the rate (docs/sweeps.md, "Diagnosis"):
// the search's diagnosis before it runs probes.
//
// The requests are the workload's open-loop requests at the configuration's own rate (multiplier
// 1) that arrive within [run] duration_s, from the workload stream of the probes' seed (the
// requests a probe at multiplier 1 replays; for agent workloads the first turns only). For each,
// from the project's own step model (sim/serving/step_model.h, built by ReplicaBuilder as the
// cluster builds its replicas, on the scenario's fidelity), with nothing else running:
//
//   isolated prefill   the prompt's uncached tokens prefilled alone on one attention rank of an
//                      otherwise idle replica (the prefill replica under P/D), in chunks of
//                      scheduler.max_batch_tokens_per_gpu, each chunk one step: the sum of those
//                      steps' durations. The cached part is the best case of the prefix cache:
//                      the leading prompt blocks whose hashes an earlier request carried, when
//                      prefix_caching is on (at most (prompt - 1) / 512 blocks, as the scheduler
//                      does). A request can get its first token no sooner: queueing, batching with
//                      others and policies only add to it (up to the noise of the routing draw,
//                      which differs when a step carries other tokens). A lower bound on TTFT;
//   isolated decode    one decode step of the sequence alone at its prompt's context (rounded
//                      down to a multiple of 512 tokens) on the decode replica: every later token
//                      takes at least that long, so a lower bound on its TPOT (two or more output
//                      tokens);
//   rejection          prompt + output beyond the model's max_context_tokens (context_too_long)
//                      or more KV blocks than one rank's pool holds (kv_capacity): rejected on
//                      arrival, at any rate.
//
// Per limit, the requests that can never meet it and whether any rate can:
//   {ttft,tpot,e2e}_pXX_ms = L   over the requests not rejected up front (a rejected request is
//        no sample): k of them have a bound > L (e2e: isolated prefill + (output - 1) x isolated
//        decode). The percentile (linear interpolation between closest ranks) exceeds L at any
//        rate when floor(q (n - 1)) >= n - k; queueing limits have no bound;
//   attainment >= A with the per-request limits   the rejected requests and those whose isolated
//        prefill exceeds the TTFT limit or isolated decode the TPOT limit can never be met; when
//        they are more than (1 - A) of the requests the attainment is below A at any rate (every
//        request decided; requests still running within their limits when a run ends are not
//        counted, which only a run too short for its requests escapes).
// Above 10,000 requests the bounds of every k-th request (evenly spaced, at most 10,000) are
// priced and the fractions are over that sample.
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
