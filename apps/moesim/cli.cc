#include "apps/moesim/cli.h"

#include <cstdlib>
#include <sstream>

namespace moesim::cli {

Args::Args(std::vector<std::string> argv, std::set<std::string> value_options,
           std::set<std::string> repeatable_options) {
  value_options.insert(repeatable_options.begin(), repeatable_options.end());
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string key = a, val;
      bool has_val = false;
      if (auto eq = a.find('='); eq != std::string::npos) {
        key = a.substr(0, eq);
        val = a.substr(eq + 1);
        has_val = true;
      }
      if (value_options.count(key) && !has_val) {
        if (i + 1 >= argv.size()) throw UsageError{"option " + key + " needs a value"};
        val = argv[++i];
        has_val = true;
      }
      if (!value_options.count(key) && has_val) {
        throw UsageError{"option " + key + " takes no value"};
      }
      if (repeatable_options.count(key)) {
        repeated_[key].push_back(val);
        continue;
      }
      if (options_.count(key)) throw UsageError{"option " + key + " given twice"};
      options_[key] = val;
    } else {
      positionals_.push_back(a);
    }
  }
}

bool Args::flag(const std::string& name) {
  asked_.insert(name);
  return options_.count(name) > 0;
}

std::optional<std::string> Args::value(const std::string& name) {
  asked_.insert(name);
  auto it = options_.find(name);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Args::values(const std::string& name) {
  asked_.insert(name);
  auto it = repeated_.find(name);
  return it == repeated_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::value_or(const std::string& name, const std::string& dflt) {
  auto v = value(name);
  return v ? *v : dflt;
}

std::vector<double> parse_number_list(const std::string& name, const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0') throw UsageError{name + ": not a number: '" + item + "'"};
    out.push_back(x);
  }
  if (out.empty()) throw UsageError{name + ": empty list"};
  return out;
}

std::optional<int64_t> Args::int_value(const std::string& name) {
  auto v = value(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0') throw UsageError{"option " + name + ": not an integer: " + *v};
  return x;
}

std::optional<double> Args::double_value(const std::string& name) {
  auto v = value(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') throw UsageError{"option " + name + ": not a number: " + *v};
  return x;
}

const std::string& Args::positional(size_t i, const std::string& what) const {
  if (i >= positionals_.size()) throw UsageError{"missing argument: " + what};
  return positionals_[i];
}

void Args::finish(size_t max_positionals) const {
  for (const auto& [k, v] : options_) {
    if (!asked_.count(k)) throw UsageError{"unknown option " + k};
  }
  for (const auto& [k, v] : repeated_) {
    if (!asked_.count(k)) throw UsageError{"unknown option " + k};
  }
  if (positionals_.size() > max_positionals) {
    throw UsageError{"unexpected argument: " + positionals_[max_positionals]};
  }
}

}  // namespace moesim::cli
