#include "base/huge_page_heap.h"

#include <gtest/gtest.h>

namespace moesim::base {
namespace {

constexpr const char* kMadvise = "always [madvise] never\n";

TEST(HugePageHeap, AddsTheTunableInMadviseMode) {
  EXPECT_EQ(huge_page_tunables(kMadvise, nullptr), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(huge_page_tunables(kMadvise, ""), "glibc.malloc.hugetlb=1");
}

TEST(HugePageHeap, KeepsTheTunablesAlreadySet) {
  EXPECT_EQ(huge_page_tunables(kMadvise, "glibc.malloc.arena_max=2"),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
}

TEST(HugePageHeap, LeavesAHugetlbSettingAsItIs) {
  // Named already: either the user's choice (=0 turns it off) or the re-executed process itself.
  EXPECT_FALSE(huge_page_tunables(kMadvise, "glibc.malloc.hugetlb=0"));
  EXPECT_FALSE(huge_page_tunables(kMadvise, "glibc.malloc.hugetlb=1"));
  EXPECT_FALSE(huge_page_tunables(kMadvise, "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"));
}

TEST(HugePageHeap, DoesNothingWhereTheKernelDecides) {
  EXPECT_FALSE(huge_page_tunables("[always] madvise never\n", nullptr));  // the heap has them
  EXPECT_FALSE(huge_page_tunables("always madvise [never]\n", nullptr));  // it cannot have them
  EXPECT_FALSE(huge_page_tunables("", nullptr));                          // not readable
}

TEST(HugePageHeap, OnlyTheCommandsThatSimulateStartTwice) {
  for (const char* c : {"run", "sweep", "search", "compare", "validate", "layers", "prune"}) {
    EXPECT_TRUE(simulates(c)) << c;
  }
  for (const char* c : {"--version", "--help", "model", "topo", "report", "engine", "runs", ""}) {
    EXPECT_FALSE(simulates(c)) << c;
  }
}

}  // namespace
}  // namespace moesim::base
