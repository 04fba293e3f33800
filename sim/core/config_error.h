// User input errors. Raised by the parsers at the edge, and by the models where inputs that each
// passed their reader combine into something the simulation cannot represent (HorizonError,
// sim/core/horizon.h); caught by the CLI, which prints what() on one line and exits with code 2.
// Format:
//   FILE[:LINE[:COL]]: KEY.PATH: REASON
// or, for errors found downstream of the readers, the reason alone.
#pragma once

#include <stdexcept>
#include <string>

namespace moesim::sim {

class ConfigError : public std::runtime_error {
 public:
  // line/column are 1-based; 0 when unknown. key_path may be empty (whole file).
  ConfigError(std::string file, int line, int column, std::string key_path, std::string reason);

  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& key_path() const { return key_path_; }
  const std::string& reason() const { return reason_; }

 protected:
  // An error that names no file or key (found downstream of the readers): what() is `reason`
  // alone; file() and key_path() are empty.
  struct NoLocation {};
  ConfigError(NoLocation, std::string reason);

 private:
  std::string file_;
  int line_;
  int column_;
  std::string key_path_;
  std::string reason_;
};

// Exit code for bad user input.
inline constexpr int kExitBadInput = 2;

// Levenshtein edit distance (for "did you mean" suggestions).
int edit_distance(const std::string& a, const std::string& b);

}  // namespace moesim::sim
