// How the rank threads of one served replica agree on each step. The replica's driver (its
// rank 0) plans a step and posts it; every other rank takes it, runs its share (the all-to-alls
// among the ranks are real collectives), and reports done; the step ends when the last rank is
// done, which is when the driver stamps its end time. A stop post ends the ranks' loops. When
// any rank fails, abort() wakes every waiter: they throw CommunicatorAbortedError, so no thread
// blocks forever (the failing rank reports the real error).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "engine/step_trace.h"

namespace moesim::engine::serve {

class StepBoard {
 public:
  explicit StepBoard(int num_ranks);

  // Driver: posts `step` (nullptr: stop) for the other ranks. `step` must stay valid until
  // wait_all_done() returns.
  void post(const TraceStep* step);
  // Rank r != 0: waits for a post newer than `seen_generation` (0 before the first take) and
  // advances it; nullptr means stop.
  const TraceStep* take(int64_t& seen_generation);
  // Every rank, the driver included, after running its share of the posted step.
  void done();
  // Driver: waits until every rank has called done() for the posted step.
  void wait_all_done();
  // Wakes every waiter with CommunicatorAbortedError, now and from then on.
  void abort();

 private:
  void throw_if_aborted() const;

  const int num_ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t generation_ = 0;  // posts so far
  const TraceStep* step_ = nullptr;
  int done_ = 0;  // ranks done with the current post
  bool aborted_ = false;
};

}  // namespace moesim::engine::serve
