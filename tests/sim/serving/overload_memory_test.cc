// Memory under overload (docs/reliability.md, "Memory and overload"): a request rejected on
// arrival keeps nothing once it is counted, so a run far past saturation holds memory bounded by
// its configuration (queues, batch, sketches), not by its arrivals. Each run goes in a child
// process, which reports its peak live heap (every operator new of this binary is counted while
// a child measures) and whose peak RSS the parent reads; the heap figure is exact and the same
// under the sanitizers, the RSS one (which holds ASan's quarantine there) is checked only
// without them. The 10^7-arrival run is bench/overload_memory.sh.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>

#include "sim/output/file_record_spool.h"
#include "tests/sim/serving/test_scenarios.h"
#include "tests/support/scratch_files.h"

#if defined(__SANITIZE_ADDRESS__)
#define MOESIM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOESIM_TEST_ASAN 1
#endif
#endif

namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_live_bytes{0}, g_peak_bytes{0};

void* counted(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  if (g_counting.load(std::memory_order_relaxed)) {
    const int64_t live = g_live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)),
                                                std::memory_order_relaxed) +
                         static_cast<int64_t>(malloc_usable_size(p));
    int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
    while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
    }
  }
  return p;
}

void uncounted(void* p) {
  if (p == nullptr) return;
  if (g_counting.load(std::memory_order_relaxed)) {
    g_live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  }
  std::free(p);
}

void* aligned(size_t n, std::align_val_t a) {
  const auto align = static_cast<size_t>(a);
  return std::aligned_alloc(align, (n + align - 1) / align * align);
}

}  // namespace

// Every allocation of this binary goes through malloc; counted while a child measures. Memory
// allocated before counting starts and freed during it makes the live figure dip below zero,
// which only lowers it: the peak is of what the measured run allocated.
void* operator new(size_t n) { return counted(std::malloc(n)); }
void* operator new[](size_t n) { return counted(std::malloc(n)); }
void* operator new(size_t n, std::align_val_t a) { return counted(aligned(n, a)); }
void* operator new[](size_t n, std::align_val_t a) { return counted(aligned(n, a)); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, size_t) noexcept { uncounted(p); }
void operator delete[](void* p, size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { uncounted(p); }

namespace moesim::sim {
namespace {

// What a child reports.
struct Measured {
  int64_t arrived = 0, rejected = 0, records = 0;
  bool conservation_ok = false, in_order = false;
  int64_t peak_heap_bytes = 0;
  int64_t peak_rss_bytes = 0;  // read by the parent
};

// Counts the records a run hands out and checks that they come in arrival order.
class OrderCheckingSink final : public RequestSink {
 public:
  void add(const RequestRecord& r, SimTime) override {
    in_order_ = in_order_ && r.request_id == last_id_ + 1 && r.arrival_ns >= last_arrival_ns_;
    last_id_ = r.request_id;
    last_arrival_ns_ = r.arrival_ns;
    ++num_;
  }
  int64_t num() const { return num_; }
  bool in_order() const { return in_order_; }

 private:
  int64_t num_ = 0;
  int32_t last_id_ = -1;
  SimTime last_arrival_ns_ = 0;
  bool in_order_ = true;
};

// Runs tests/data/scenarios/tiny_overload.toml for `duration_s` in a child; with `spool_dir`,
// with a request sink and a file spool there (as `moesim run --out` does).
Measured run_in_child(double duration_s, const std::string& spool_dir = "") {
  Scenario sc = testing::test_scenario("tiny_overload");
  sc.run.duration_s = duration_s;
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    Measured m;
    int code = 0;
    try {
      RunOptions opt;
      OrderCheckingSink sink;
      std::optional<output::FileRecordSpool> spool;
      g_counting = true;
      if (!spool_dir.empty()) {
        spool.emplace(spool_dir);
        opt.request_sinks.push_back(&sink);
        opt.record_spool = &*spool;
      }
      const RunOutput out = run_scenario(sc, opt);
      g_counting = false;
      m.arrived = out.summary.num_arrived + out.summary.measurement.num_warmup_requests;
      m.rejected = out.counters.actions.count("reject:queue_full") > 0
                       ? out.counters.actions.at("reject:queue_full")
                       : 0;
      m.records = sink.num();
      m.in_order = sink.in_order();
      m.conservation_ok = out.conservation_ok;
      m.peak_heap_bytes = g_peak_bytes;
    } catch (...) {
      code = 3;
    }
    const ssize_t n = ::write(fds[1], &m, sizeof m);
    ::_exit(n == static_cast<ssize_t>(sizeof m) ? code : 4);
  }
  ::close(fds[1]);
  Measured m;
  EXPECT_EQ(::read(fds[0], &m, sizeof m), static_cast<ssize_t>(sizeof m));
  ::close(fds[0]);
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  m.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  return m;
}

constexpr int64_t kMiB = int64_t{1} << 20;

void expect_overloaded(const Measured& m, int64_t min_arrivals) {
  ::testing::Test::RecordProperty("arrivals_" + std::to_string(min_arrivals),
                                  std::to_string(m.arrived) + " arrivals, peak heap " +
                                      std::to_string(m.peak_heap_bytes) + " B, peak RSS " +
                                      std::to_string(m.peak_rss_bytes) + " B");
  EXPECT_TRUE(m.conservation_ok);
  EXPECT_GE(m.arrived, min_arrivals);
  EXPECT_GT(m.rejected * 100, m.arrived * 95) << "not overloaded";
}

// 10^5 and 10^6 arrivals at 10^7 per second: ten times the arrivals, the same memory. Before
// requests rejected on arrival left their records, each held ~440 bytes until every older
// request had finished: the peak heap rose by ~400 MB between the two.
TEST(OverloadMemory, RejectedArrivalsKeepNothing) {
  const Measured small = run_in_child(0.01);
  const Measured large = run_in_child(0.1);
  expect_overloaded(small, 90'000);
  expect_overloaded(large, 900'000);
  EXPECT_LT(large.peak_heap_bytes - small.peak_heap_bytes, 4 * kMiB)
      << small.peak_heap_bytes << " -> " << large.peak_heap_bytes;
  EXPECT_LT(large.peak_heap_bytes, 8 * kMiB);
#ifndef MOESIM_TEST_ASAN
  EXPECT_LT(large.peak_rss_bytes - small.peak_rss_bytes, 16 * kMiB)
      << small.peak_rss_bytes << " -> " << large.peak_rss_bytes;
#endif
}

// With a request sink (requests.csv) the rejected records wait in a file spool while older
// requests run: every arrival reaches the sink once, in arrival order, and memory stays flat.
TEST(OverloadMemory, RejectedRecordsReachTheSinkInOrderThroughAFileSpool) {
  const std::string dir = moesim::scratch::path("spool");
  std::filesystem::create_directories(dir);
  const Measured small = run_in_child(0.01, dir);
  const Measured large = run_in_child(0.1, dir);
  expect_overloaded(small, 90'000);
  expect_overloaded(large, 900'000);
  for (const Measured& m : {small, large}) {
    EXPECT_EQ(m.records, m.arrived);
    EXPECT_TRUE(m.in_order);
  }
  EXPECT_LT(large.peak_heap_bytes - small.peak_heap_bytes, 4 * kMiB)
      << small.peak_heap_bytes << " -> " << large.peak_heap_bytes;
#ifndef MOESIM_TEST_ASAN
  EXPECT_LT(large.peak_rss_bytes - small.peak_rss_bytes, 16 * kMiB)
      << small.peak_rss_bytes << " -> " << large.peak_rss_bytes;
#endif
  // The spool file has no name: nothing is left in its directory.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

}  // namespace
}  // namespace moesim::sim
