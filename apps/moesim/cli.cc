// The one translation unit that includes CLI11 (its headers are heavy): CommandLine wraps a
// CLI::App, reads numbers strictly after CLI11 has split the arguments, turns CLI11's parse
// errors into the command line's one-line usage errors, and names the nearest option for a typo.
#include "apps/moesim/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "base/number_text.h"

namespace moesim::cli {
namespace {

// --help: "usage: moesim SYNOPSIS", the description, the arguments and options, the footer.
class HelpFormatter final : public CLI::Formatter {
 public:
  explicit HelpFormatter(std::string usage) : usage_(std::move(usage)) {
    column_width(kColumn);
    label("REQUIRED", "");
    label("Positionals", "arguments");
  }
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    std::ostringstream out;
    out << "usage: moesim " << usage_ << "\n";
    if (!app->get_description().empty()) out << "\n" << app->get_description() << "\n";
    out << make_positionals(app) << make_groups(app, mode);
    if (!app->get_footer().empty()) out << "\n" << app->get_footer() << "\n";
    return out.str();
  }
  // The description wrapped to the help's width, after the name column.
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string out, line;
    std::istringstream words(opt->get_description());
    std::string word;
    while (words >> word) {
      if (!line.empty() && line.size() + 1 + word.size() > kWidth - kColumn) {
        out += line + "\n";
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    return out + line;
  }

 private:
  static constexpr size_t kColumn = 30;
  static constexpr size_t kWidth = 100;

  std::string usage_;
};

bool looks_like_option(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  char* end = nullptr;
  std::strtod(arg.c_str(), &end);
  return *end != '\0';  // "-1" and "-0.5" are values, not options
}

// The option a CLI11 message starts with ("--seed: ..."), or "".
std::string option_of(const std::string& what) {
  const size_t colon = what.find(':');
  return colon == std::string::npos ? "" : what.substr(0, colon);
}

// Every number of every command goes through base/number_text.h (int64 range, finite values);
// the command's API checks the option's documented domain.
std::optional<int64_t> to_integer(const std::string& name, const std::string& text) {
  std::string reason;
  const std::optional<int64_t> x = parse_integer_text(text, &reason);
  if (!x) throw UsageError{"option " + name + ": " + reason};
  return x;
}

std::optional<double> to_number(const std::string& name, const std::string& text) {
  std::string reason;
  const std::optional<double> x = parse_number_text(text, &reason);
  if (!x) throw UsageError{"option " + name + ": " + reason};
  return x;
}

// An argument for a message: at most 100 characters (an unknown option of 100 KB is cut).
std::string cut_argument(const std::string& arg) {
  constexpr size_t kMaxChars = 100;
  return arg.size() <= kMaxChars ? arg : arg.substr(0, kMaxChars) + "... (cut)";
}

// Set while a ParseOnly lives on this thread.
thread_local bool parse_only = false;

// Whether `word` is `candidate` with letters left out ("--sed" of "--seed").
bool is_subsequence(const std::string& word, const std::string& candidate) {
  size_t i = 0;
  for (char c : candidate) {
    if (i < word.size() && word[i] == c) ++i;
  }
  return i == word.size();
}

// The long name of "-o,--out" ("--out"), else its first name.
std::string display_name(const std::string& names) {
  std::string first;
  std::stringstream ss(names);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.rfind("--", 0) == 0) return name;
    if (first.empty()) first = name;
  }
  return first;
}

}  // namespace

std::vector<double> parse_number_list(const std::string& name, const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::string reason;
    const std::optional<double> x = parse_number_text(item, &reason);
    if (!x) throw UsageError{name + ": " + reason};
    out.push_back(*x);
  }
  if (out.empty()) throw UsageError{name + ": empty list"};
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  bool best_contains = false;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    const bool contains = is_subsequence(word, c);
    if (d < best_distance || (d == best_distance && contains && !best_contains)) {
      best = c;
      best_distance = d;
      best_contains = contains;
    }
  }
  if (!best.empty()) return best;
  // A shortened or older name ("--gpu-price", "--model"): the shortest option containing it.
  const std::string stem = word.substr(
      word.find_first_not_of('-') == std::string::npos ? word.size() : word.find_first_not_of('-'));
  if (stem.size() < 3) return "";
  for (const std::string& c : candidates) {
    if (c.find(stem) != std::string::npos && (best.empty() || c.size() < best.size())) best = c;
  }
  return best;
}

struct CommandLine::Impl {
  explicit Impl(const std::string& usage, const std::string& description) : app(description) {
    app.formatter(std::make_shared<HelpFormatter>(usage));
    app.option_defaults()->group("options");
    app.set_help_flag("-h,--help", "print this help");
    app.allow_extras();
  }
  CLI::App app;
  std::vector<std::string> option_names;           // for the suggestion of an unknown option
  std::vector<std::function<void()>> after_parse;  // conversions and checks, in declaration order
  std::vector<std::unique_ptr<std::string>> raw;   // the text of the typed options

  CLI::Option* add_value(const std::string& names, std::string* text,
                         const std::string& placeholder, const std::string& help) {
    std::stringstream ss(names);
    std::string name;
    while (std::getline(ss, name, ',')) option_names.push_back(name);
    return app.add_option(names, *text, help)->type_name(placeholder);
  }

  template <typename T, typename Convert>
  void add_typed(const std::string& names, std::optional<T>* value, const std::string& placeholder,
                 const std::string& help, Convert convert) {
    raw.push_back(std::make_unique<std::string>());
    std::string* text = raw.back().get();
    CLI::Option* opt = add_value(names, text, placeholder, help);
    const std::string name = display_name(names);
    after_parse.push_back([opt, text, value, name, convert] {
      if (opt->count() > 0) *value = convert(name, *text);
    });
  }
};

CommandLine::CommandLine(const std::string& usage, const std::string& description)
    : impl_(std::make_unique<Impl>(usage, description)) {}

CommandLine::~CommandLine() = default;

CommandLine& CommandLine::positional(const std::string& name, std::string* value,
                                     const std::string& help) {
  CLI::Option* opt = impl_->app.add_option(name, *value, help)->type_name("");
  impl_->after_parse.insert(impl_->after_parse.begin(), [opt, name] {
    if (opt->count() == 0) throw UsageError{"missing argument: " + name};
  });
  return *this;
}

CommandLine& CommandLine::positionals(const std::string& name, std::vector<std::string>* values,
                                      const std::string& help, size_t at_least) {
  impl_->app.add_option(name, *values, help)->type_name("");
  impl_->after_parse.push_back([values, name, at_least] {
    if (values->size() < at_least) throw UsageError{"missing argument: " + name};
  });
  return *this;
}

CommandLine& CommandLine::flag(const std::string& names, bool* value, const std::string& help) {
  std::stringstream ss(names);
  std::string name;
  while (std::getline(ss, name, ',')) impl_->option_names.push_back(name);
  impl_->app.add_flag(names, *value, help);
  return *this;
}

CommandLine& CommandLine::option(const std::string& names, std::optional<std::string>* value,
                                 const std::string& placeholder, const std::string& help) {
  impl_->add_typed(names, value, placeholder, help,
                   [](const std::string&, const std::string& text) { return text; });
  return *this;
}

CommandLine& CommandLine::option(const std::string& names, std::optional<int64_t>* value,
                                 const std::string& placeholder, const std::string& help) {
  impl_->add_typed(names, value, placeholder, help, to_integer);
  return *this;
}

CommandLine& CommandLine::option(const std::string& names, std::optional<double>* value,
                                 const std::string& placeholder, const std::string& help) {
  impl_->add_typed(names, value, placeholder, help, to_number);
  return *this;
}

CommandLine& CommandLine::option(const std::string& names, std::vector<std::string>* values,
                                 const std::string& placeholder, const std::string& help) {
  std::stringstream ss(names);
  std::string name;
  while (std::getline(ss, name, ',')) impl_->option_names.push_back(name);
  impl_->app.add_option(names, *values, help)
      ->type_name(placeholder)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  return *this;
}

CommandLine& CommandLine::option_with(const std::string& names, const std::string& placeholder,
                                      const std::string& help,
                                      std::function<void(const std::string&)> convert) {
  impl_->raw.push_back(std::make_unique<std::string>());
  std::string* text = impl_->raw.back().get();
  CLI::Option* opt = impl_->add_value(names, text, placeholder, help);
  impl_->after_parse.push_back([opt, text, convert = std::move(convert)] {
    if (opt->count() > 0) convert(*text);
  });
  return *this;
}

CommandLine& CommandLine::footer(const std::string& text) {
  impl_->app.footer(text);
  return *this;
}

std::string CommandLine::help() const { return impl_->app.help(); }

bool CommandLine::parse(const std::vector<std::string>& argv) {
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 pops from the back
  try {
    impl_->app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    if (!parse_only) std::fputs(help().c_str(), stdout);
    return false;
  } catch (const CLI::ArgumentMismatch& e) {
    const std::string what = e.what();
    const std::string name = option_of(what);
    throw UsageError{what.find("missing") != std::string::npos ? "option " + name + " needs a value"
                                                               : "option " + name + " given twice"};
  } catch (const CLI::ConversionError& e) {
    throw UsageError{"an option that takes no value was given one: " + std::string(e.what())};
  } catch (const CLI::ParseError& e) {
    throw UsageError{e.what()};
  }
  for (const std::string& arg : impl_->app.remaining()) {
    if (!looks_like_option(arg)) continue;
    const std::string name = arg.substr(0, arg.find('='));
    const std::string hint = nearest(name, impl_->option_names);
    throw UsageError{"unknown option " + cut_argument(name) +
                     (hint.empty() ? "" : " (did you mean " + hint + "?)")};
  }
  for (const auto& step : impl_->after_parse) step();
  if (!impl_->app.remaining().empty()) {
    throw UsageError{"unexpected argument: " + cut_argument(impl_->app.remaining().front())};
  }
  return !parse_only;
}

ParseOnly::ParseOnly() { parse_only = true; }
ParseOnly::~ParseOnly() { parse_only = false; }

}  // namespace moesim::cli
