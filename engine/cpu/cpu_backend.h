// The CPU backend: host memory, Eigen GEMMs (multi-threaded through OpenMP when the build found
// it; the thread count is Eigen's default, i.e. OMP_NUM_THREADS), the reference implementation
// of every operation in engine/backend.h. Each operation's arithmetic lives in a free function
// of engine/cpu/reference.h that works on host Tensors, so GPU tests can call the reference
// directly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/backend.h"

namespace moesim::engine::cpu {

struct CpuBackendOptions {
  // Total bytes allocate() may hand out; nullopt = 80% of MemAvailable at creation.
  std::optional<int64_t> memory_limit_bytes;
};

// A fresh CPU backend: world size 1 (all_to_all returns false) until init_distributed gives it
// an in-process communicator (engine/cpu/thread_communicator.h), through which all_to_all then
// copies rows between the ranks' host buffers.
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

// What the CPU backend's Timer measures. kThreadCpu: CPU time of the calling thread
// (CLOCK_THREAD_CPUTIME_ID), chosen when Eigen runs single-threaded (OMP_NUM_THREADS=1): the
// reference operations run synchronously on the calling thread, so this is the operation's own
// compute, and time the thread spends preempted on a loaded, shared machine is not counted (on a
// 2-core machine with 12 runnable processes, wall time inflates any op longer than a scheduler
// slice several-fold). kWall: steady_clock, when Eigen uses several threads (a thread's CPU time
// would miss its helpers' work).
enum class CpuClock { kThreadCpu, kWall };
CpuClock cpu_timer_clock();
// A timer using cpu_timer_clock().
std::unique_ptr<Timer> make_cpu_timer();

// Makes freed heap memory stay in the process (make_cpu_backend calls it): allocations come
// from the heap, not from fresh mmaps (on the main thread all of them; on other threads, e.g.
// in-process ranks, those up to a thread arena's 64 MiB), and the heap's top is never returned
// to the kernel, so an op's scratch reuses pages that are already mapped. The CPU operations
// allocate their scratch (FP32 copies of BF16 weights, intermediates) per call; with glibc's
// defaults whether a call's scratch was mapped afresh depended on the process's allocation history,
// and a call that got fresh pages paid their faults in its CPU time: the tiny model's dense FFN at
// 17 tokens took 6.4 ms on one simulated GPU and 0.47 ms on the other, at 256 tokens 14 ms
// against 5.4 ms; the DeepSeek-V3 slice's dense FFN took 5.5 s against 0.78 s (docs/engine.md,
// "Timing on a shared machine").
void keep_freed_heap_memory();

// Bytes the kernel reports as MemAvailable in /proc/meminfo; 0 when unreadable.
int64_t host_available_memory_bytes();

}  // namespace moesim::engine::cpu
