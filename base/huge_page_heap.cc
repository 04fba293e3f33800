#include "base/huge_page_heap.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace moesim::base {

std::optional<std::string> huge_page_tunables(std::string_view thp_enabled, const char* tunables) {
  if (thp_enabled.find("[madvise]") == std::string_view::npos) return std::nullopt;
  const std::string_view current = tunables ? tunables : "";
  if (current.find("glibc.malloc.hugetlb") != std::string_view::npos) return std::nullopt;
  std::string next(current);
  if (!next.empty()) next += ':';
  next += "glibc.malloc.hugetlb=1";
  return next;
}

bool simulates(std::string_view command) {
  for (const std::string_view c :
       {"run", "sweep", "search", "compare", "validate", "layers", "prune"}) {
    if (command == c) return true;
  }
  return false;
}

void reexec_with_huge_page_heap(char** argv) {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string thp_enabled{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  const std::optional<std::string> tunables =
      huge_page_tunables(thp_enabled, std::getenv("GLIBC_TUNABLES"));
  if (!tunables) return;
  // The re-executed process finds the tunable named and does not come back here.
  if (setenv("GLIBC_TUNABLES", tunables->c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
}

}  // namespace moesim::base
