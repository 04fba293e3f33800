// Shared by the output writers and their locks (output_files.cc, output_locks.cc): the text of an
// errno, a bad output path as a ConfigError (exit 2), and the directory a path's file lives in.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>

#include "sim/config/config_error.h"

namespace moesim::sim::io::detail {

inline std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] inline void bad_path(const std::string& path, const std::string& option,
                                  const std::string& reason) {
  throw ConfigError(path, 0, 0, option, reason);
}

// "." for a bare file name.
inline std::string parent_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace moesim::sim::io::detail
