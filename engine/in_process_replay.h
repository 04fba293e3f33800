// A multi-rank replay inside one process: N threads, thread r a rank with its own backend joined
// to an in-process communicator group (engine/cpu/thread_communicator.h), each playing GPU r of
// the replica with real (host-memory) all-to-alls. This is how the multi-rank path runs and is
// tested without GPUs (`moesim-engine replay --backend cpu --nranks N`).
//
// Output: one measurement stream, as if one replay had played every rank's GPU: one header whose
// sim_gpus lists the ranks' GPUs in rank order, then rank 0's records, rank 1's, ...
#pragma once

#include <functional>
#include <memory>

#include "engine/backend.h"
#include "engine/measurement.h"
#include "engine/replay.h"
#include "engine/step_trace.h"

namespace moesim::engine {

// Creates the backend of rank `rank`, called on that rank's thread.
using RankBackendFactory = std::function<std::unique_ptr<Backend>(int rank)>;

// Replays `trace` on num_ranks >= 2 ranks and writes the merged records to `writer`. Errors: the
// first rank's error in rank order is rethrown after every thread has ended (InputError for a
// replica whose GPU count is not num_ranks, OutOfMemoryError, ...); the other ranks are woken from
// their collectives (CommunicatorAbortedError, not rethrown). Nothing is written on error.
// The summary: gpus of every rank in rank order, and record counts summed over ranks.
ReplaySummary replay_trace_in_process(const StepTrace& trace, const ReplayOptions& options,
                                      int num_ranks, const RankBackendFactory& make_rank_backend,
                                      MeasurementWriter& writer);

}  // namespace moesim::engine
