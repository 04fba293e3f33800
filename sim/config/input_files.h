// The simulator's side of base/input_file.h: every file sim/ reads goes through these, so that a
// path that is not a regular file of bounded size (/dev/zero, a FIFO, a directory, a 20 GB file
// given as a scenario) is a ConfigError naming the file and the reason (exit 2) before anything
// is read, and no reader holds more of a file than its kind's limit.
#pragma once

#include <istream>
#include <string>
#include <utility>

#include "base/input_file.h"
#include "sim/config/config_error.h"
#include "sim/config/toml_source.h"

namespace moesim::sim {

using moesim::InputKind;

// ConfigError(path, reason) for a file that cannot be read: `missing_reason` when the path names
// nothing (each reader keeps its wording, e.g. "cannot open file"), else the InputFile's reason.
[[noreturn]] void throw_input_problem(const std::string& path, const InputProblem& problem,
                                      const std::string& missing_reason);

// The whole of `path`, an input of `kind`; ConfigError naming the file otherwise.
std::string read_input_text(const std::string& path, InputKind kind,
                            const std::string& missing_reason = "cannot open file");

// `read(std::istream&)` over the contents of `path` (an input of `kind`) and its result. A read
// that passes the limit or fails ends the stream and is reported as such (ConfigError), even when
// `read` returned or threw its own ConfigError on the cut text.
template <typename Read>
auto read_input_stream(const std::string& path, InputKind kind, const std::string& missing_reason,
                       Read&& read) {
  InputFile file(path, kind);
  if (!file.ok()) throw_input_problem(path, *file.problem(), missing_reason);
  try {
    auto result = std::forward<Read>(read)(file.stream());
    if (!file.ok()) throw_input_problem(path, *file.problem(), missing_reason);
    return result;
  } catch (const ConfigError&) {
    if (!file.ok()) throw_input_problem(path, *file.problem(), missing_reason);
    throw;
  }
}

// For a path a configuration names at `key` and reads later: "file not found: PATH" when it
// names nothing, "REASON: PATH" when it is not a readable input of `kind` (table.fail, exit 2).
void check_input_path(TomlTable& table, std::string_view key, const std::string& path,
                      InputKind kind);

}  // namespace moesim::sim
