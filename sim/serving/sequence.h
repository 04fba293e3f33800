// One request being served, as the replica schedulers and the cluster see it: its request, where
// it runs (replica, attention rank), how far its prefill and decode got, and the KV blocks it
// holds. Sequences live in one table owned by the cluster, indexed by sequence id (the order of
// admission), because a sequence moves between replicas under P/D disaggregation; the table keeps
// only the window from the oldest unfinished sequence on (IdWindow). A request rejected on
// arrival never gets a sequence.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sim/core/time.h"
#include "sim/metrics/run_metrics.h"
#include "sim/workload/request.h"

namespace moesim::sim {

struct alignas(64) Seq {
  // What every step reads and writes fills the entry's first cache line (entries are aligned to
  // it): the flags, the token counts and the KV capacity, then the request, whose own first
  // fields are its prompt and output token counts (request.h). The per-sequence loops of a step
  // touch that line only.
  int32_t rank = -1;
  bool running = false;
  bool first_admission_done = false;
  bool decode_only = false;    // arrived on a decode replica with its KV transferred
  int64_t prefill_target = 0;  // tokens whose KV must be computed before decoding
  int64_t prefilled = 0;
  int64_t generated = 0;
  int64_t capacity_tokens = 0;  // tokens the sequence's KV blocks (owned + pinned) hold
  int64_t owned_blocks = 0;     // KV + state blocks owned exclusively
  Request req;
  int32_t sid = -1;  // sequence id: the index in the cluster's table
  int32_t replica = -1;
  // The request's place among the cluster's arrivals (rejected ones included, which get no
  // sequence): the order of records, and the id of its events in the digest.
  int64_t arrival_idx = -1;
  int64_t num_hit_blocks = 0;       // leading prefix blocks pinned from the cache
  int64_t num_inserted_blocks = 0;  // prompt prefix blocks this sequence inserted (pinned)
  uint64_t admit_order = 0;         // the scheduler's admission counter at the last admission
  // Figures the request's record reports (the cluster copies them into it).
  SimTime first_scheduled_ns = -1;   // first admission, -1 before
  int64_t cached_prompt_tokens = 0;  // prompt tokens served by the prefix cache at admission
  int32_t num_preemptions = 0;
  // Tiered KV cache (kv_tiers.h): the prefix blocks its admission loads from host DRAM / SSD are
  // in HBM at kv_ready_ns (its prefill waits until then); kv_load_ns is that wait at the first
  // admission, and loaded_prompt_tokens the prompt tokens loaded (part of cached_prompt_tokens).
  SimTime kv_ready_ns = 0;
  SimTime kv_load_ns = 0;
  int64_t kv_load_id = -1;  // the load kv_ready_ns waits for (KvLoad::id); -1 none
  int64_t loaded_prompt_tokens = 0;
};
static_assert(offsetof(Seq, req) + offsetof(Request, output_tokens) + sizeof(int64_t) <= 64,
              "the fields a step reads fit the entry's first cache line");

// The record of request `r` arriving at `now_ns` (in flight).
RequestRecord arrival_record(const Request& r, SimTime now_ns);
// Copies what `s` measured so far (first scheduling, cached and loaded prompt tokens,
// preemptions, KV load time) into its record.
void sync_record(const Seq& s, RequestRecord& record);

}  // namespace moesim::sim
