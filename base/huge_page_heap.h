// The heap on transparent huge pages. A simulation at cluster scale keeps tens to hundreds of MB
// of small objects (sequence and request tables, KV caches, per-GPU tables) that every step walks:
// on 4 KiB pages that costs one page fault per page at first touch and TLB misses on every pass.
// glibc's malloc asks the kernel for 2 MiB pages (madvise(MADV_HUGEPAGE) on its heap) under the
// tunable glibc.malloc.hugetlb=1, which it reads only when a process starts: so the program's
// main() re-executes itself once with the tunable added, before anything else runs.
//
// It does so only where it changes something: the kernel's transparent huge pages in "madvise"
// mode (in "always" mode the heap has them already, in "never" it cannot), and GLIBC_TUNABLES
// not already naming glibc.malloc.hugetlb (so `GLIBC_TUNABLES=glibc.malloc.hugetlb=0` turns it
// off). Pages never change a result: the allocator's layout is not an input of the simulation.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace moesim::base {

// The GLIBC_TUNABLES value to re-execute with, or nullopt when not to: `thp_enabled` is the
// content of /sys/kernel/mm/transparent_hugepage/enabled (empty when unreadable), `tunables` the
// current GLIBC_TUNABLES (nullptr when unset).
std::optional<std::string> huge_page_tunables(std::string_view thp_enabled, const char* tunables);

// Whether `moesim COMMAND` simulates (run, sweep, search, compare, validate, layers, prune):
// the commands whose heap is worth a second start.
bool simulates(std::string_view command);

// Re-executes this program (/proc/self/exe, the same argv and environment plus the tunable) when
// huge_page_tunables() says so; returns when it does not or the exec fails (the run goes on
// with the heap as it is). Call first in main(), before any output or thread.
void reexec_with_huge_page_heap(char** argv);

}  // namespace moesim::base
