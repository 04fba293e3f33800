// Scenario overrides: a dotted TOML key path ("deployment.replicas") and a scalar value, applied
// by editing the scenario's TOML tree and parsing the re-serialised text with the scenario's
// directory as the base for relative paths. The scenario parser then checks the edited file as
// it checks any other: an unknown key path is an "unknown key" error, a bad value a range error.
//
// Rationale: editing the tree (rather than the parsed Scenario struct) keeps one parser and one
// set of checks for every figure a sweep, a comparison or a rate search can change.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "sim/scenario/scenario.h"

namespace moesim::sim::study {

// A TOML scalar: integer, float, boolean or string.
using OverrideValue = std::variant<int64_t, double, bool, std::string>;

struct Override {
  std::string key_path;  // dotted, e.g. "scheduler.max_seqs"; no empty segment
  OverrideValue value;
};

// The value as written in CSV cells and tables: integers in decimal, floats in the shortest form
// that reads back to the same double, booleans as true/false, strings as they are.
std::string override_value_text(const OverrideValue& value);
// "key=value, key=value" for messages; "(base)" when empty.
std::string overrides_text(std::span<const Override> overrides);

// "KEY.PATH=VALUE" (the command line's --set): the value as TOML reads it (integer, float,
// boolean, quoted string), any other text as a string. ConfigError naming `what` when there is
// no '='; a key path with an empty segment is instantiate()'s error.
Override parse_override(const std::string& text, const std::string& what);

// A scenario file held as a TOML tree, from which scenarios with overrides are made. Immutable
// after load(); instantiate() may be called from several threads at once.
class ScenarioTemplate {
 public:
  // Reads the file and checks its TOML syntax (ConfigError with line:column); the scenario itself
  // is checked by instantiate().
  static ScenarioTemplate load(const std::string& path);

  // A scenario held in memory (the Python module's dicts): `name` stands for the file in
  // messages and `base_dir` resolves relative paths. instantiate() parses its text.
  static ScenarioTemplate from_table(toml::table root, const std::string& name,
                                     const std::string& base_dir);

  // The scenario's TOML text with `overrides` applied in order (a later override of the same key
  // wins). Missing intermediate tables are created. Throws ConfigError naming the scenario file
  // and the key path when a path segment names a value that is not a table, or the last segment
  // names a table.
  std::string text_with(std::span<const Override> overrides) const;

  // The parsed scenario with `overrides` applied and its policy settings resolved
  // (resolve_policy_settings, sim/policy/policy_registry.h). Without overrides this is
  // load_scenario(path). With overrides, errors are ConfigErrors naming the scenario file, the
  // key path and the overrides (line numbers of the re-serialised text would mislead, so none is
  // given); policy errors are reported as make_policies reports them.
  Scenario instantiate(std::span<const Override> overrides) const;

  // A copy without the keys or tables at `key_paths` (dotted, e.g. "policies" or
  // "policies.concurrency_cap"): `moesim compare --drop-a`. ConfigError naming the scenario file
  // and the key path when one is absent.
  ScenarioTemplate without(std::span<const std::string> key_paths) const;

  const std::string& path() const { return path_; }
  // Whether path() is a file the scenario was read from (false for from_table()).
  bool from_file() const { return from_file_; }
  // Directory that relative paths in the scenario are resolved against.
  const std::string& base_dir() const { return base_dir_; }

 private:
  std::string path_;
  std::string base_dir_;
  bool from_file_ = true;
  bool edited_ = false;  // keys removed by without(): instantiate() parses the tree, not the file
  std::shared_ptr<const toml::table> root_;
};

}  // namespace moesim::sim::study
