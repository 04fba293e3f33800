#include "sim/core/config_error.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace moesim::sim {
namespace {

std::string cut_for_message(const std::string& text) {
  constexpr size_t kMaxChars = 400;
  return text.size() <= kMaxChars ? text : text.substr(0, kMaxChars) + "... (cut)";
}

std::string format_message(const std::string& file, int line, int column,
                           const std::string& key_path, const std::string& reason) {
  std::string msg = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    msg += ":" + std::to_string(line);
    if (column > 0) msg += ":" + std::to_string(column);
  }
  msg += ": ";
  // A key path naming a huge unknown key (100 KB) and a reason quoting a huge input value (a
  // 300 KB string) are cut alike: a message is for people.
  if (!key_path.empty()) msg += cut_for_message(key_path) + ": ";
  msg += cut_for_message(reason);
  return msg;
}

}  // namespace

ConfigError::ConfigError(std::string file, int line, int column, std::string key_path,
                         std::string reason)
    : std::runtime_error(format_message(file, line, column, key_path, reason)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      key_path_(std::move(key_path)),
      reason_(std::move(reason)) {}

ConfigError::ConfigError(NoLocation, std::string reason)
    : std::runtime_error(reason), line_(0), column_(0), reason_(std::move(reason)) {}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace moesim::sim
