// Internal to sim/model: the key-recording JSON object reader behind the HuggingFace import
// (hf_config.cc, hf_quantization.cc). Every getter range-checks its value and records the key as
// read; finish() turns any key neither read nor ignored into an error with a "did you mean"
// suggestion, so a new architecture or quantisation feature is never silently dropped.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace moesim::sim {

// 1-based line and column of byte `offset` in `text`.
void hf_line_col(std::string_view text, size_t offset, int* line, int* col);

class HfJsonReader {
 public:
  // `obj`, `text` and `ignored` must outlive the reader. `prefix` is this object's key path
  // ("" for the root, "text_config." for a nested object); `ignored` lists keys finish() accepts
  // without their being read (nullptr: none).
  HfJsonReader(const nlohmann::json& obj, std::string_view text, std::string file,
               std::string prefix, const std::set<std::string, std::less<>>* ignored);

  // A reader for the object under `key` of this one (key path prefix + key + ".").
  HfJsonReader child(const nlohmann::json& obj, const std::string& key,
                     const std::set<std::string, std::less<>>* ignored) const;

  // Throws ConfigError(file, line:col of the key's first occurrence, prefix + key, reason).
  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;

  // Whether `key` is present and not null (records it as read).
  bool has(std::string_view key);

  // Integer in [lo, hi]. Missing or null: `dflt` when given, else an error. Floats (1.0, 1e400),
  // booleans, strings and integers beyond int64 are errors, never converted.
  int64_t get_int(std::string_view key, int64_t lo, int64_t hi,
                  std::optional<int64_t> dflt = std::nullopt);
  std::string get_string(std::string_view key, std::optional<std::string> dflt = std::nullopt);
  bool get_bool(std::string_view key, bool dflt);
  // The object under `key`, or nullptr when missing or null; anything else is an error.
  const nlohmann::json* get_object(std::string_view key);
  // The value under `key` of any type, or nullptr when missing or null.
  const nlohmann::json* get_raw(std::string_view key);
  // Arrays; missing or null is empty.
  std::vector<int64_t> get_int_array(std::string_view key, int64_t lo, int64_t hi);
  std::vector<std::string> get_string_array(std::string_view key);

  // Marks `key` as known without reading it.
  void ignore(std::string_view key);
  // Raises an error for the first key (in sorted order) neither read nor ignored.
  void finish() const;

  const std::string& file() const { return file_; }
  const std::string& prefix() const { return prefix_; }

 private:
  static std::string type_of(const nlohmann::json& v);
  int64_t checked_int(std::string_view key, const nlohmann::json& v, int64_t lo, int64_t hi) const;

  const nlohmann::json& obj_;
  std::string_view text_;
  std::string file_;
  std::string prefix_;
  const std::set<std::string, std::less<>>* ignored_;
  std::set<std::string, std::less<>> asked_;
};

}  // namespace moesim::sim
