#include "engine/serve/step_board.h"

#include "base/check.h"
#include "engine/communicator.h"

namespace moesim::engine::serve {

StepBoard::StepBoard(int num_ranks) : num_ranks_(num_ranks) {
  MOESIM_CHECK(num_ranks >= 1, "StepBoard: num_ranks >= 1");
}

void StepBoard::throw_if_aborted() const {
  if (aborted_) throw CommunicatorAbortedError("another rank of the served replica failed");
}

void StepBoard::post(const TraceStep* step) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_aborted();
  step_ = step;
  done_ = 0;
  ++generation_;
  changed_.notify_all();
}

const TraceStep* StepBoard::take(int64_t& seen_generation) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return aborted_ || generation_ > seen_generation; });
  throw_if_aborted();
  seen_generation = generation_;
  return step_;
}

void StepBoard::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_aborted();
  ++done_;
  if (done_ == num_ranks_) changed_.notify_all();
}

void StepBoard::wait_all_done() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return aborted_ || done_ == num_ranks_; });
  throw_if_aborted();
}

void StepBoard::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  changed_.notify_all();
}

}  // namespace moesim::engine::serve
