#include "sim/core/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/core/rng.h"

namespace moesim::sim {
namespace {

// The obvious implementation: a vector scanned for the (time, seq) minimum.
class ReferenceQueue {
 public:
  void push(const Event& ev) { events_.push_back(ev); }
  Event pop() {
    auto it = std::min_element(events_.begin(), events_.end(), EventOrder());
    Event out = *it;
    events_.erase(it);
    return out;
  }
  bool empty() const { return events_.empty(); }

 private:
  std::vector<Event> events_;
};

TEST(EventQueue, SameTimeEventsPopInInsertionOrder) {
  EventQueue q;
  q.push(Event{.time = 5, .kind = 1, .id0 = 100});
  q.push(Event{.time = 3, .kind = 1, .id0 = 200});
  q.push(Event{.time = 5, .kind = 1, .id0 = 101});
  q.push(Event{.time = 5, .kind = 1, .id0 = 102});
  q.push(Event{.time = 3, .kind = 1, .id0 = 201});
  std::vector<int64_t> order;
  while (!q.empty()) order.push_back(q.pop().id0);
  EXPECT_EQ(order, (std::vector<int64_t>{200, 201, 100, 101, 102}));
}

TEST(EventQueue, PushAssignsIncreasingSequenceIgnoringInput) {
  EventQueue q;
  EXPECT_EQ(q.push(Event{.time = 1, .seq = 77}), 0u);
  EXPECT_EQ(q.push(Event{.time = 0, .seq = 3}), 1u);
  EXPECT_EQ(q.top().seq, 1u);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.pop().time, 0);
  EXPECT_EQ(q.pop().seq, 0u);
  EXPECT_TRUE(q.empty());
}

// Random interleavings of pushes and pops, with times drawn from a small range so that many
// events share a time, must pop exactly as the reference does.
TEST(EventQueue, MatchesSortedReferenceOnRandomWorkloads) {
  for (int trial = 0; trial < 20; ++trial) {
    RngStream rng(1234, "event_queue_trial_" + std::to_string(trial));
    EventQueue q;
    ReferenceQueue ref;
    uint64_t next_seq = 0;
    const uint64_t time_range = trial % 2 == 0 ? 8 : 1'000'000;
    SimTime floor_time = 0;  // events are never pushed before the last popped time
    for (int op = 0; op < 5000; ++op) {
      const bool do_push = ref.empty() || rng.uniform_int(100) < 55;
      if (do_push) {
        Event ev{.time = floor_time + static_cast<SimTime>(rng.uniform_int(time_range)),
                 .kind = static_cast<EventKind>(rng.uniform_int(4)),
                 .id0 = op,
                 .id1 = -op};
        const uint64_t seq = q.push(ev);
        EXPECT_EQ(seq, next_seq);
        ev.seq = next_seq++;
        ref.push(ev);
      } else {
        const Event want = ref.pop();
        ASSERT_EQ(q.top().seq, want.seq);
        const Event got = q.pop();
        ASSERT_EQ(got.time, want.time);
        ASSERT_EQ(got.seq, want.seq);
        ASSERT_EQ(got.kind, want.kind);
        ASSERT_EQ(got.id0, want.id0);
        ASSERT_EQ(got.id1, want.id1);
        floor_time = got.time;
      }
    }
    while (!ref.empty()) {
      ASSERT_FALSE(q.empty());
      ASSERT_EQ(q.pop().seq, ref.pop().seq);
    }
    EXPECT_TRUE(q.empty());
  }
}

}  // namespace
}  // namespace moesim::sim
