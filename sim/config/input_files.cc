#include "sim/config/input_files.h"

#include <optional>

namespace moesim::sim {

void throw_input_problem(const std::string& path, const InputProblem& problem,
                         const std::string& missing_reason) {
  throw ConfigError(path, 0, 0, "", problem.missing ? missing_reason : problem.reason);
}

std::string read_input_text(const std::string& path, InputKind kind,
                            const std::string& missing_reason) {
  InputFile file(path, kind);
  std::optional<std::string> text;
  if (file.ok()) text = file.read_all();
  if (!text) throw_input_problem(path, *file.problem(), missing_reason);
  return std::move(*text);
}

void check_input_path(TomlTable& table, std::string_view key, const std::string& path,
                      InputKind kind) {
  const std::optional<InputProblem> problem = input_file_problem(path, kind);
  if (!problem) return;
  // The reason before the path: a path of thousands of characters is cut in the message.
  table.fail(key, problem->missing ? "file not found: " + path : problem->reason + ": " + path);
}

}  // namespace moesim::sim
