// moesim engine ARGS...: runs moesim-engine with ARGS (the real execution engine is its own
// binary so that it builds on GPU machines without the simulator's dependencies). The engine is
// $MOESIM_ENGINE when set, else moesim-engine beside this binary (installed layout) or in the
// build tree's engine/ directory next to apps/, else the first one on PATH. The engine replaces
// this process, so its output and exit code are the command's.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"

namespace moesim::cli {
namespace {

namespace fs = std::filesystem;

// Where moesim-engine is looked for, in order; an entry without '/' is searched on PATH.
std::vector<std::string> engine_candidates() {
  if (const char* env = std::getenv("MOESIM_ENGINE"); env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((self.parent_path() / "moesim-engine").string());
    out.push_back((self.parent_path().parent_path() / "engine" / "moesim-engine").string());
  }
  out.push_back("moesim-engine");
  return out;
}

}  // namespace

int engine_command(const std::vector<std::string>& argv) {
  const std::vector<std::string> candidates = engine_candidates();
  std::vector<char*> args;
  args.push_back(const_cast<char*>("moesim-engine"));
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string tried;
  for (const std::string& path : candidates) {
    if (path.find('/') != std::string::npos) {
      if (access(path.c_str(), X_OK) != 0) {
        tried += "\n  " + path + ": " + std::strerror(errno);
        continue;
      }
      execv(path.c_str(), args.data());
    } else {
      execvp(path.c_str(), args.data());
    }
    tried += "\n  " + path + ": " + std::strerror(errno);
  }
  throw UsageError{
      "cannot run moesim-engine (build the moesim-engine target, or set "
      "MOESIM_ENGINE to its path); tried:" +
      tried};
}

}  // namespace moesim::cli
