// The moesim command line: one file per subcommand (*_cmd.cc), each declaring its options once on
// a CommandLine (parsed by CLI11, which also generates --help) and calling the typed API
// (sim/api.h); this layer only parses arguments and prints.
//
// Usage errors (an unknown option, a missing value, a malformed number) are UsageErrors: main.cc
// prints them as "moesim CMD: MESSAGE (see moesim CMD --help)" and exits 2. An unknown option
// names the nearest option of the command ("did you mean --out?").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/api/usage_error.h"

namespace moesim::cli {

using UsageError = sim::api::UsageError;

// The comma-separated numbers of option `name` ("4,8,16"); a malformed or non-finite item or an
// empty list is a usage error naming the option.
std::vector<double> parse_number_list(const std::string& name, const std::string& text);

// Levenshtein edit distance between `a` and `b` (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate nearest to `word` by edit distance (ties: one that holds `word` with letters left
// out, "--seed" for "--sed", then the first) when one is within
// max(2, word.size() / 3) edits; else the shortest candidate containing `word` without its
// leading dashes (a shortened or renamed option: "--gpu-price", "--model"); else "".
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// One subcommand's arguments. Options take "--name VALUE" or "--name=VALUE"; names may list a
// short alias ("-o,--out"). Each option may be given once, except the repeatable ones. Numbers
// are read strictly by base/number_text.h: a malformed number, an integer beyond int64 or a
// number that is not finite ("nan", "inf", "1e400") is a usage error naming the option; each
// command's API then checks the option's documented domain.
class CommandLine {
 public:
  // `usage`: the command's synopsis after "moesim ", e.g. "run SCENARIO [options]";
  // `description`: what --help prints under it.
  CommandLine(const std::string& usage, const std::string& description);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // A required positional argument.
  CommandLine& positional(const std::string& name, std::string* value, const std::string& help);
  // The remaining positional arguments (none or more; a usage error names `name` when
  // `at_least` are not given).
  CommandLine& positionals(const std::string& name, std::vector<std::string>* values,
                           const std::string& help, size_t at_least = 0);
  CommandLine& flag(const std::string& names, bool* value, const std::string& help);
  CommandLine& option(const std::string& names, std::optional<std::string>* value,
                      const std::string& placeholder, const std::string& help);
  CommandLine& option(const std::string& names, std::optional<int64_t>* value,
                      const std::string& placeholder, const std::string& help);
  CommandLine& option(const std::string& names, std::optional<double>* value,
                      const std::string& placeholder, const std::string& help);
  // An option whose text `convert` turns into its value during parse() (a list, a range, a
  // pair); `convert` throws UsageError naming the option for a bad value.
  CommandLine& option_with(const std::string& names, const std::string& placeholder,
                           const std::string& help,
                           std::function<void(const std::string& text)> convert);
  // A repeatable option: every value, in the order given.
  CommandLine& option(const std::string& names, std::vector<std::string>* values,
                      const std::string& placeholder, const std::string& help);
  // Text after the options in --help (exit codes, notes).
  CommandLine& footer(const std::string& text);

  // Parses `argv` (the arguments after the subcommand words) and converts every value. Returns
  // false when --help (-h) was given: the help is then printed on stdout and nothing else is
  // read; and under a ParseOnly, after a complete parse (nothing printed). Throws UsageError.
  bool parse(const std::vector<std::string>& argv);
  // The generated help text.
  std::string help() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// While one lives on this thread, CommandLine::parse() checks and converts every argument and
// then returns false, as for --help, so that a command returns 0 before any work: the CLI's
// argument fuzz target (tests/fuzz/cli_args_fuzz.cc) parses every command's options this way.
class ParseOnly {
 public:
  ParseOnly();
  ~ParseOnly();
  ParseOnly(const ParseOnly&) = delete;
  ParseOnly& operator=(const ParseOnly&) = delete;
};

// Subcommands. Each returns the process exit code (0 ok, 1 failed run or output, 2 bad input)
// and may throw ConfigError, UsageError (exit 2) or OutputError (exit 1).
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
int layers_command(const std::vector<std::string>& argv);
int prune_command(const std::vector<std::string>& argv);
int calibrate_command(const std::vector<std::string>& argv);
int derive_profile_command(const std::vector<std::string>& argv);
int validate_command(const std::vector<std::string>& argv);
int compare_command(const std::vector<std::string>& argv);
int sweep_command(const std::vector<std::string>& argv);
int search_command(const std::vector<std::string>& argv);
int trace_fit_command(const std::vector<std::string>& argv);
// Runs the HTML report generator python/moesim_report (report_cmd.cc).
int report_command(const std::vector<std::string>& argv);
// Forwards to the moesim-engine binary (engine_cmd.cc).
int engine_command(const std::vector<std::string>& argv);

}  // namespace moesim::cli
