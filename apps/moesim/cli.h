// Command-line arguments of one moesim subcommand: positionals and --options.
// Each subcommand asks for the options it knows; finish() rejects the rest (exit code 2).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace moesim::sim::study {
class ScenarioTemplate;
}  // namespace moesim::sim::study

namespace moesim::cli {

// A usage error: printed with the subcommand's usage line, exit code 2.
struct UsageError {
  std::string message;
};

// The comma-separated numbers of option `name` ("4,8,16"); a malformed item or an empty list is
// a usage error naming the option.
std::vector<double> parse_number_list(const std::string& name, const std::string& text);

class Args {
 public:
  // argv without the program name and subcommand words. `--key=value` and `--key value` both
  // work for options that take values; an option given twice is an error, except the
  // repeatable ones (which take values; values() returns them in order).
  Args(std::vector<std::string> argv, std::set<std::string> value_options,
       std::set<std::string> repeatable_options = {});

  // True when the flag was given (e.g. "--json").
  bool flag(const std::string& name);
  std::optional<std::string> value(const std::string& name);
  std::string value_or(const std::string& name, const std::string& dflt);
  // Integer option; malformed numbers are usage errors.
  std::optional<int64_t> int_value(const std::string& name);
  std::optional<double> double_value(const std::string& name);
  // All values of a repeatable option, in the order given (empty when not given).
  std::vector<std::string> values(const std::string& name);
  const std::vector<std::string>& positionals() const { return positionals_; }
  // The positional at index i, or a usage error naming `what`.
  const std::string& positional(size_t i, const std::string& what) const;
  // Throws UsageError for any option no accessor asked for, or extra positionals beyond max.
  void finish(size_t max_positionals) const;
  bool help_requested() const { return help_; }

 private:
  std::vector<std::string> positionals_;
  std::map<std::string, std::string> options_;                // flags map to ""
  std::map<std::string, std::vector<std::string>> repeated_;  // repeatable options' values
  std::set<std::string> asked_;
  bool help_ = false;
};

// Subcommands. Each returns the process exit code (0 ok, 1 failed run,
// 2 bad input) and may throw ConfigError (exit 2) or UsageError (exit 2).
using CommandFn = int (*)(const std::vector<std::string>& argv);

struct Command {
  const char* name;     // e.g. "model"
  const char* summary;  // one line for `moesim --help`
  CommandFn fn;
};

// Defined in one file per subcommand (model_cmd.cc, topo_cmd.cc, ...).
int model_command(const std::vector<std::string>& argv);
int topo_command(const std::vector<std::string>& argv);
int collective_command(const std::vector<std::string>& argv);
int run_command(const std::vector<std::string>& argv);
// `moesim run` for the Python module (docs/python.md), printing the summary to `report` instead
// of stdout. With `scenario` (a scenario held in memory, e.g. a dict) argv is run_command's
// without the SCENARIO positional; with nullptr it is run_command's.
int run_command_on(const sim::study::ScenarioTemplate* scenario,
                   const std::vector<std::string>& argv, std::ostream& report);
int layers_command(const std::vector<std::string>& argv);
int prune_command(const std::vector<std::string>& argv);
int calibrate_command(const std::vector<std::string>& argv);
int derive_profile_command(const std::vector<std::string>& argv);
int validate_command(const std::vector<std::string>& argv);
int compare_command(const std::vector<std::string>& argv);
int sweep_command(const std::vector<std::string>& argv);
int search_command(const std::vector<std::string>& argv);
// Runs the HTML report generator python/moesim_report (report_cmd.cc).
int report_command(const std::vector<std::string>& argv);
// Forwards to the moesim-engine binary (engine_cmd.cc).
int engine_command(const std::vector<std::string>& argv);

}  // namespace moesim::cli
