// Reading TOML input with key paths and unknown-key detection.
//
// A TomlTable is a view of one table plus the set of keys the parser asked for. Every getter
// records its key (present or not); finish() then reports any key in the file that no getter
// asked for as "unknown key", suggesting the nearest asked key. Every error is a ConfigError
// naming the file, line:column of the offending node, the dotted key path and the reason.
// Nothing is clamped: range checks raise errors.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/config_error.h"

namespace moesim::sim {

class TomlTable {
 public:
  // `table` and `file` must outlive this view. `path` is the dotted key path of this table
  // ("" for the root).
  TomlTable(const toml::table* table, std::shared_ptr<const std::string> file, std::string path);

  bool has(std::string_view key) const;
  // Whether `key` is present and holds an array (for keys that take a list or one value).
  bool is_array(std::string_view key) const;

  // Required values: missing key or wrong type is an error. get_double accepts integers.
  int64_t get_int(std::string_view key);
  double get_double(std::string_view key);
  std::string get_string(std::string_view key);
  bool get_bool(std::string_view key);

  // Optional values with a default used when the key is absent (wrong type is still an error).
  int64_t get_int_or(std::string_view key, int64_t default_value);
  double get_double_or(std::string_view key, double default_value);
  std::string get_string_or(std::string_view key, std::string default_value);
  bool get_bool_or(std::string_view key, bool default_value);
  std::optional<int64_t> find_int(std::string_view key);
  std::optional<double> find_double(std::string_view key);
  std::optional<std::string> find_string(std::string_view key);

  // Range-checked values (inclusive bounds): out of range is an error, never clamped.
  int64_t get_int_in(std::string_view key, int64_t lo, int64_t hi);
  int64_t get_int_in_or(std::string_view key, int64_t lo, int64_t hi, int64_t default_value);
  double get_double_in(std::string_view key, double lo, double hi);
  double get_double_in_or(std::string_view key, double lo, double hi, double default_value);
  // A string that must be one of `allowed`; the error lists the valid values.
  std::string get_enum(std::string_view key, std::initializer_list<std::string_view> allowed);
  std::string get_enum_or(std::string_view key, std::initializer_list<std::string_view> allowed,
                          std::string default_value);

  // Arrays of scalars (every element must have the type; integers accepted as doubles).
  std::vector<double> get_double_array(std::string_view key);
  std::vector<int64_t> get_int_array(std::string_view key);
  std::vector<std::string> get_string_array(std::string_view key);
  std::optional<std::vector<double>> find_double_array(std::string_view key);
  std::optional<std::vector<int64_t>> find_int_array(std::string_view key);

  // Sub-tables. The caller must call finish() on each returned table when done with it.
  TomlTable get_table(std::string_view key);
  std::optional<TomlTable> find_table(std::string_view key);
  // An array of tables ([[key]]); absent key gives an empty vector when optional.
  std::vector<TomlTable> get_table_array(std::string_view key, bool required = true);
  // Keys of this table in file order (for tables whose keys are names, e.g. [policies.x]).
  // Marks them all as asked.
  std::vector<std::string> keys();

  // Raises ConfigError for `key` (located at its node when present, else at this table).
  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;
  // Raises ConfigError for this table itself.
  [[noreturn]] void fail_table(const std::string& reason) const;
  // Raises an error for the first key present in the file that no getter asked for.
  void finish() const;

  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }
  // Dotted path of a child key.
  std::string key_path(std::string_view key) const;

 private:
  const toml::node* node(std::string_view key) const;
  [[noreturn]] void fail_at(const toml::node* n, std::string_view key,
                            const std::string& reason) const;
  void ask(std::string_view key) { asked_.emplace(key); }

  const toml::table* table_;
  std::shared_ptr<const std::string> file_;
  std::string path_;
  std::set<std::string, std::less<>> asked_;
};

// A parsed TOML file. Owns the tree that its root() view points into.
class TomlDocument {
 public:
  // Parses the file; a syntax error or unreadable file is a ConfigError with line:column.
  static TomlDocument load_file(const std::string& path);
  // Parses text; `name` stands for the file in error messages.
  static TomlDocument parse_string(std::string_view text, const std::string& name);

  TomlDocument(TomlDocument&&) noexcept;
  TomlDocument& operator=(TomlDocument&&) noexcept;
  ~TomlDocument();

  TomlTable root() const;
  const std::string& file() const { return *file_; }

 private:
  TomlDocument();
  std::unique_ptr<toml::table> table_;
  std::shared_ptr<const std::string> file_;
};

}  // namespace moesim::sim
