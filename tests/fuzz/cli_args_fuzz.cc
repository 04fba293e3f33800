// Fuzzes the command-line parsers: the input is an argv vector, its words separated by NUL bytes.
// A first word "moesim-engine" sends the rest to the engine's parser (engine/options.h);
// otherwise the first word names a `moesim` command, whose function runs under cli::ParseOnly:
// every option is parsed, converted and checked, and the command returns before any work
// (apps/moesim/cli.h). The documented outcomes are a return or a UsageError (the engine's, or the
// command line's; a --set override may raise ConfigError); anything else is a finding.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "apps/moesim/cli.h"
#include "engine/options.h"
#include "sim/config/config_error.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using moesim::cli::CommandFn;

struct NamedCommand {
  const char* name;
  CommandFn fn;
};

// Every `moesim` command but `engine`, which replaces the process with moesim-engine (whose
// parser is fuzzed directly).
const NamedCommand kCommands[] = {
    {"model", moesim::cli::model_command},
    {"topo", moesim::cli::topo_command},
    {"collective", moesim::cli::collective_command},
    {"run", moesim::cli::run_command},
    {"layers", moesim::cli::layers_command},
    {"prune", moesim::cli::prune_command},
    {"calibrate", moesim::cli::calibrate_command},
    {"derive-profile", moesim::cli::derive_profile_command},
    {"validate", moesim::cli::validate_command},
    {"compare", moesim::cli::compare_command},
    {"sweep", moesim::cli::sweep_command},
    {"search", moesim::cli::search_command},
    {"trace-fit", moesim::cli::trace_fit_command},
    {"report", moesim::cli::report_command},
};

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find('\0', at), text.size());
    words.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  return words;
}

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s escaped the option parser\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> words = split_words(moesim::fuzz::as_text(data, size));
  const std::vector<std::string> rest(words.begin() + 1, words.end());
  if (words.front() == "moesim-engine") {
    moesim::fuzz::expect_clean_or<moesim::engine::InputError>(
        [&] { moesim::engine::parse_engine_args(rest); });
    return 0;
  }
  for (const NamedCommand& c : kCommands) {
    if (words.front() != c.name) continue;
    const moesim::cli::ParseOnly parse_only;
    try {
      if (c.fn(rest) != 0) finding("a non-zero exit without an error");
    } catch (const moesim::cli::UsageError&) {
      // The documented bad-input error.
    } catch (const moesim::sim::ConfigError&) {
      // A malformed --set KEY.PATH=VALUE override.
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz finding: %s\n", e.what());
      finding("an exception");
    } catch (...) {
      finding("a non-std exception");
    }
  }
  return 0;
}
