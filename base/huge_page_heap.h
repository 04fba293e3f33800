// The heap on transparent huge pages. A cluster-scale simulation walks tens to hundreds of MB of
// small objects every step; on 4 KiB pages that costs page faults at first touch and TLB misses on
// every pass. glibc's malloc uses 2 MiB pages under the tunable glibc.malloc.hugetlb=1, read only
// at process start, so main() re-executes itself once with it added, where that changes something
// (THP in "madvise" mode, GLIBC_TUNABLES not naming the tunable). Pages never change a result.
// docs/reliability.md, "Memory and overload".
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
