// The CPU backend keeps freed heap memory (cpu::keep_freed_heap_memory): an op's per-call scratch
// must not be mapped afresh, or its page faults land in the op's CPU time.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstring>
#include <memory>

#include "engine/cpu/cpu_backend.h"

// AddressSanitizer replaces malloc: mallopt does not reach its allocator, whose quarantine keeps
// freed memory out of reuse by design.
#if defined(__SANITIZE_ADDRESS__)
#define MOESIM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOESIM_TEST_ASAN 1
#endif
#endif

namespace moesim::engine::cpu {
namespace {

int64_t minor_faults() {
  rusage usage{};
  EXPECT_EQ(getrusage(RUSAGE_THREAD, &usage), 0);
  return usage.ru_minflt;
}

// Allocates, writes and frees `bytes`, as an op's scratch.
void scratch(size_t bytes) {
  std::unique_ptr<char[]> buffer(new char[bytes]);
  std::memset(buffer.get(), 1, bytes);
  volatile char sink = buffer[bytes - 1];
  (void)sink;
}

TEST(CpuBackendHeap, FreedScratchIsReusedWithoutPageFaults) {
#ifdef MOESIM_TEST_ASAN
  GTEST_SKIP() << "glibc's allocator is what this checks; AddressSanitizer replaces it";
#endif
  const std::unique_ptr<Backend> backend = make_cpu_backend({});
  // 64 MiB: above glibc's largest mmap threshold, so with its defaults every call maps (and
  // faults in) 16,384 fresh pages.
  constexpr size_t kBytes = 64u << 20;
  scratch(kBytes);
  const int64_t before = minor_faults();
  scratch(kBytes);
  scratch(kBytes);
  EXPECT_LT(minor_faults() - before, 500);
}

}  // namespace
}  // namespace moesim::engine::cpu
