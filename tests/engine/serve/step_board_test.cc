#include "engine/serve/step_board.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/communicator.h"

namespace moesim::engine::serve {
namespace {

TEST(StepBoard, EveryRankRunsEveryPostedStepOnce) {
  constexpr int kRanks = 3;
  StepBoard board(kRanks);
  std::vector<TraceStep> steps(5);
  for (size_t i = 0; i < steps.size(); ++i) steps[i].step_idx = static_cast<int64_t>(i);
  std::vector<std::vector<int64_t>> seen(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 1; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      int64_t generation = 0;
      while (const TraceStep* s = board.take(generation)) {
        seen[r].push_back(s->step_idx);
        board.done();
      }
    });
  }
  for (const TraceStep& s : steps) {
    board.post(&s);
    seen[0].push_back(s.step_idx);
    board.done();
    board.wait_all_done();
  }
  board.post(nullptr);
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(seen[r], (std::vector<int64_t>{0, 1, 2, 3, 4})) << r;
}

TEST(StepBoard, AbortWakesWaiters) {
  StepBoard board(2);
  std::atomic<bool> threw{false};
  std::thread waiter([&] {
    int64_t generation = 0;
    try {
      board.take(generation);
    } catch (const CommunicatorAbortedError&) {
      threw = true;
    }
  });
  board.abort();
  waiter.join();
  EXPECT_TRUE(threw);
  EXPECT_THROW(board.wait_all_done(), CommunicatorAbortedError);
}

}  // namespace
}  // namespace moesim::engine::serve
