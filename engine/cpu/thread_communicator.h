// An in-process communicator group: N ranks played by N threads of one process, exchanging rows
// through shared host memory. It lets `moesim-engine replay --backend cpu --nranks N` play an
// N-GPU replica with all its ranks and run (and time) the dispatch and combine all-to-alls on a
// machine without GPUs, through the same Communicator interface the NCCL path implements.
//
// all_to_all_bytes: every rank publishes its send buffer and counts, waits at a barrier, copies
// the rows its peers send it out of their buffers into its own receive buffer, and waits at a
// second barrier so that no rank reuses its send buffer while a peer is still reading it. When
// a rank fails (an exception on its thread), abort() wakes every rank waiting in the group; they
// throw CommunicatorAbortedError.
#pragma once

#include <memory>
#include <vector>

#include "engine/communicator.h"

namespace moesim::engine::cpu {

// world_size communicators of one group, element r for rank r; world_size >= 1. Each must be
// used by one thread at a time; the group lives as long as any of them.
std::vector<std::shared_ptr<Communicator>> make_thread_communicators(int world_size);

// Marks the group of `communicator` (one made by make_thread_communicators) as failed: ranks
// waiting in or entering a collective throw CommunicatorAbortedError from then on.
void abort_thread_group(Communicator& communicator);

}  // namespace moesim::engine::cpu
