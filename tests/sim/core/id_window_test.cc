#include "sim/core/id_window.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace moesim::sim {
namespace {

// Entries with heap memory of their own, so retiring one has something to free.
struct Entry {
  int64_t id = -1;
  std::vector<int64_t> payload;
};

Entry make(int64_t id) { return Entry{id, std::vector<int64_t>(3, id)}; }

TEST(IdWindow, IdsAreHandedOutInOrderAndIndexTheirEntries) {
  IdWindow<Entry> w;
  EXPECT_TRUE(w.empty());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(w.push_back(make(i)), i);
  EXPECT_EQ(w.size(), 1000);
  EXPECT_EQ(w.window(), 1000);
  EXPECT_EQ(w.front_id(), 0);
  for (int64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(w[i].id, i);
    ASSERT_EQ(w[i].payload, std::vector<int64_t>(3, i));
  }
}

TEST(IdWindow, RetiringKeepsTheRestAcrossChunkBoundaries) {
  // Interleaved appends and retirements cross many 256-entry chunks, and the window empties
  // in the middle of a chunk and refills from there.
  IdWindow<Entry> w;
  int64_t next = 0;
  for (int round = 0; round < 40; ++round) {
    for (int k = 0; k < 97; ++k) w.push_back(make(next++));
    const int64_t retire = round % 3 == 2 ? w.window() : 61;
    for (int64_t k = 0; k < retire; ++k) w.pop_front();
    ASSERT_EQ(w.front_id() + w.window(), next);
    for (int64_t id = w.front_id(); id < next; ++id) ASSERT_EQ(w[id].id, id);
    if (!w.empty()) {
      EXPECT_EQ(w.front().id, w.front_id());
    }
  }
  EXPECT_EQ(w.size(), next);
}

TEST(IdWindow, ReferencesStayValidThroughAppendsAndRetirements) {
  IdWindow<Entry> w;
  for (int64_t i = 0; i < 300; ++i) w.push_back(make(i));
  Entry& kept = w[299];
  const Entry* address = &kept;
  for (int64_t i = 300; i < 5000; ++i) w.push_back(make(i));
  for (int i = 0; i < 299; ++i) w.pop_front();
  EXPECT_EQ(&w[299], address);
  EXPECT_EQ(kept.id, 299);
  EXPECT_EQ(kept.payload, std::vector<int64_t>(3, 299));
}

TEST(IdWindow, PrefetchOutsideTheWindowIsHarmless) {
  IdWindow<Entry> w;
  w.prefetch(0);  // empty
  for (int64_t i = 0; i < 10; ++i) w.push_back(make(i));
  w.pop_front();
  w.prefetch(0);   // retired
  w.prefetch(10);  // not yet handed out
  w.prefetch(5);
  EXPECT_EQ(w[5].id, 5);
}

TEST(IdWindowDeathTest, IndexOutsideTheWindowIsABrokenInvariant) {
  IdWindow<Entry> w;
  for (int64_t i = 0; i < 3; ++i) w.push_back(make(i));
  w.pop_front();
  EXPECT_DEATH(w[0], "outside the live window");
  EXPECT_DEATH(w[3], "outside the live window");
}

}  // namespace
}  // namespace moesim::sim
