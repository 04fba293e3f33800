#include "sim/study/sweep_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/policy/policy_registry.h"

namespace moesim::sim::study {
namespace {

int32_t line_of(const toml::node* n) {
  return n ? static_cast<int32_t>(n->source().begin.line) : 0;
}
int32_t column_of(const toml::node* n) {
  return n ? static_cast<int32_t>(n->source().begin.column) : 0;
}

[[noreturn]] void fail_at(const std::string& file, const toml::node* n, const std::string& key,
                          const std::string& reason) {
  throw ConfigError(file, line_of(n), column_of(n), key, reason);
}

// Rejects keys of `table` outside `allowed`, suggesting the nearest allowed key.
void check_keys(const std::string& file, const toml::table& table, const std::string& prefix,
                const std::vector<std::string>& allowed) {
  for (const auto& entry : table) {
    const toml::key& k = entry.first;
    std::string key(k.str());
    bool known = false;
    std::string best;
    int best_distance = 1 << 30;
    for (const std::string& a : allowed) {
      if (a == key) known = true;
      int d = edit_distance(a, key);
      if (d < best_distance) best_distance = d, best = a;
    }
    if (known) continue;
    std::string reason = "unknown key '" + key + "'";
    if (best_distance <= 3) reason += " (did you mean '" + best + "'?)";
    throw ConfigError(file, static_cast<int>(k.source().begin.line),
                      static_cast<int>(k.source().begin.column), prefix + key, reason);
  }
}

OverrideValue scalar_value(const std::string& file, const toml::node& n, const std::string& key,
                           bool as_double) {
  if (n.is_integer()) {
    int64_t v = n.as_integer()->get();
    if (as_double) return static_cast<double>(v);
    return v;
  }
  if (n.is_floating_point()) return n.as_floating_point()->get();
  if (n.is_boolean()) return n.as_boolean()->get();
  if (n.is_string()) {
    std::string s = n.as_string()->get();
    if (s.find_first_of("\r\n") != std::string::npos) {
      fail_at(file, &n, key, "string values may not contain line breaks");
    }
    return s;
  }
  fail_at(file, &n, key, "values must be integers, floats, booleans or strings");
}

SweepParameter parse_parameter(const std::string& file, const toml::table& t,
                               const std::string& prefix) {
  check_keys(file, t, prefix, {"key", "values", "linked_to"});
  SweepParameter p;
  const toml::node* key = t.get("key");
  if (!key) fail_at(file, &t, prefix + "key", "missing required key (string)");
  if (!key->is_string()) fail_at(file, key, prefix + "key", "expected a string");
  p.key_path = key->as_string()->get();
  p.line = line_of(key);
  if (p.key_path.empty() || p.key_path.front() == '.' || p.key_path.back() == '.' ||
      p.key_path.find("..") != std::string::npos) {
    fail_at(file, key, prefix + "key", "'" + p.key_path + "' is not a dotted key path");
  }
  const toml::node* values = t.get("values");
  if (!values) fail_at(file, &t, prefix + "values", "missing required key (array)");
  const toml::array* arr = values->as_array();
  if (!arr || arr->empty()) fail_at(file, values, prefix + "values", "expected a non-empty array");
  bool any_float = false, any_int = false;
  std::optional<toml::node_type> type;
  for (const toml::node& v : *arr) {
    toml::node_type ty = v.type();
    any_float |= ty == toml::node_type::floating_point;
    any_int |= ty == toml::node_type::integer;
    bool numeric = ty == toml::node_type::floating_point || ty == toml::node_type::integer;
    bool type_numeric =
        type && (*type == toml::node_type::floating_point || *type == toml::node_type::integer);
    if (type && ty != *type && !(numeric && type_numeric)) {
      fail_at(file, &v, prefix + "values", "all values must have one type");
    }
    type = ty;
  }
  bool as_double = any_float && any_int;
  for (const toml::node& v : *arr) {
    p.values.push_back(scalar_value(file, v, prefix + "values", as_double));
    p.value_lines.push_back(line_of(&v));
  }
  return p;
}

// Reads `linked_to` of parameter `p` (table `t`): the key of one of `earlier`, with as many values.
// A link to a linked parameter is a link to its dimension.
void link_parameter(const std::string& file, const toml::table& t, const std::string& prefix,
                    const std::vector<SweepParameter>& earlier, SweepParameter& p) {
  const toml::node* link = t.get("linked_to");
  if (!link) return;
  if (!link->is_string()) fail_at(file, link, prefix + "linked_to", "expected a string");
  const std::string target = link->as_string()->get();
  std::string known;
  for (size_t k = 0; k < earlier.size(); ++k) {
    if (earlier[k].key_path == target) {
      p.linked_to = earlier[k].linked_to.value_or(k);
      break;
    }
    known += (known.empty() ? "" : ", ") + earlier[k].key_path;
  }
  if (!p.linked_to) {
    fail_at(file, link, prefix + "linked_to",
            "'" + target +
                "' is no earlier parameter (earlier: " + (known.empty() ? "none" : known) + ")");
  }
  const size_t n = earlier[*p.linked_to].values.size();
  if (p.values.size() != n) {
    fail_at(file, t.get("values"), prefix + "values",
            std::to_string(p.values.size()) + " values where '" + target + "', which '" +
                p.key_path + "' is linked to, has " + std::to_string(n) +
                ": linked parameters advance together and need as many values");
  }
}

// True when one dotted path is a segment-wise prefix of the other (or they are equal).
bool related_paths(const std::string& a, const std::string& b) {
  const std::string& shorter = a.size() <= b.size() ? a : b;
  const std::string& longer = a.size() <= b.size() ? b : a;
  if (longer.compare(0, shorter.size(), shorter) != 0) return false;
  return longer.size() == shorter.size() || longer[shorter.size()] == '.';
}

// Schema errors (an unknown key, policy or enum value; a value of the wrong type) hold for every
// configuration, whatever the other parameters' values.
bool is_schema_error(const ConfigError& e) {
  return e.reason().rfind("unknown ", 0) == 0 || e.reason().rfind("expected ", 0) == 0;
}

// A figure cell (sim/metrics/figure_text.h): 15 significant digits, shortest form; empty where
// the figure has no data.

}  // namespace

SweepSpec load_sweep(const std::string& path, const std::optional<std::string>& scenario_path) {
  const std::string text = read_input_text(path, InputKind::kConfig);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(path, static_cast<int>(e.source().begin.line),
                      static_cast<int>(e.source().begin.column), "",
                      "TOML syntax error: " + std::string(e.description()));
  }
  check_keys(path, root, "", {"scenario", "description", "seeds", "replications", "parameters"});

  SweepSpec spec;
  spec.file = path;
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  if (scenario_path) {
    spec.scenario_path = *scenario_path;
  } else {
    const toml::node* sc = root.get("scenario");
    if (!sc) fail_at(path, &root, "scenario", "missing required key (string)");
    if (!sc->is_string()) fail_at(path, sc, "scenario", "expected a string");
    std::filesystem::path p(sc->as_string()->get());
    spec.scenario_path =
        (p.is_absolute() ? p : std::filesystem::path(base_dir) / p).lexically_normal().string();
  }
  if (const toml::node* d = root.get("description"); d && !d->is_string()) {
    fail_at(path, d, "description", "expected a string");
  }

  const toml::node* seeds = root.get("seeds");
  const toml::node* reps = root.get("replications");
  if (seeds && reps) fail_at(path, reps, "replications", "give either seeds or replications");
  if (seeds) {
    const toml::array* arr = seeds->as_array();
    if (!arr || arr->empty()) fail_at(path, seeds, "seeds", "expected a non-empty array");
    std::set<uint64_t> seen;
    for (const toml::node& s : *arr) {
      if (!s.is_integer() || s.as_integer()->get() < 0) {
        fail_at(path, &s, "seeds", "seeds must be integers >= 0");
      }
      uint64_t v = static_cast<uint64_t>(s.as_integer()->get());
      if (!seen.insert(v).second) fail_at(path, &s, "seeds", "seed listed twice");
      spec.seeds.push_back(v);
    }
  }
  if (reps) {
    if (!reps->is_integer() || reps->as_integer()->get() < 1 ||
        reps->as_integer()->get() > 1000000) {
      fail_at(path, reps, "replications", "expected an integer in [1, 1000000]");
    }
    spec.num_replications = static_cast<int32_t>(reps->as_integer()->get());
  }

  if (const toml::node* params = root.get("parameters")) {
    const toml::array* arr = params->as_array();
    if (!arr || !arr->is_array_of_tables()) {
      fail_at(path, params, "parameters", "expected an array of tables ([[parameters]])");
    }
    for (size_t i = 0; i < arr->size(); ++i) {
      std::string prefix = "parameters[" + std::to_string(i) + "].";
      SweepParameter p = parse_parameter(path, *arr->get(i)->as_table(), prefix);
      for (const SweepParameter& q : spec.parameters) {
        if (q.key_path == p.key_path) {
          fail_at(path, arr->get(i)->as_table()->get("key"), prefix + "key",
                  "parameter '" + p.key_path + "' given twice");
        }
      }
      link_parameter(path, *arr->get(i)->as_table(), prefix, spec.parameters, p);
      spec.parameters.push_back(std::move(p));
    }
  }
  return spec;
}

void check_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario) {
  make_policies(scenario.instantiate({}));
  for (size_t i = 0; i < spec.parameters.size(); ++i) {
    const SweepParameter& p = spec.parameters[i];
    for (size_t j = 0; j < p.values.size(); ++j) {
      Override o{p.key_path, p.values[j]};
      try {
        make_policies(scenario.instantiate(std::span<const Override>(&o, 1)));
      } catch (const ConfigError& e) {
        if (!is_schema_error(e) || !related_paths(e.key_path(), p.key_path)) continue;
        throw ConfigError(spec.file, p.value_lines[j], 0, "parameters[" + std::to_string(i) + "]",
                          "'" + p.key_path + "' = " + override_value_text(p.values[j]) + ": " +
                              e.key_path() + ": " + e.reason() + " (in " + scenario.path() + ")");
      }
    }
  }
}

std::vector<std::vector<Override>> grid_configs(const SweepSpec& spec) {
  // Mixed-radix counting over the dimensions (the parameters without a link), last fastest.
  std::vector<size_t> dims;
  for (size_t k = 0; k < spec.parameters.size(); ++k) {
    if (!spec.parameters[k].linked_to) dims.push_back(k);
  }
  const int64_t num_configs = num_grid_configs(spec);
  std::vector<std::vector<Override>> configs;
  configs.reserve(static_cast<size_t>(num_configs));
  std::vector<size_t> value_idx(spec.parameters.size(), 0);  // by parameter; dimensions only
  for (int64_t c = 0; c < num_configs; ++c) {
    int64_t rest = c;
    for (size_t d = dims.size(); d-- > 0;) {
      const auto n = static_cast<int64_t>(spec.parameters[dims[d]].values.size());
      value_idx[dims[d]] = static_cast<size_t>(rest % n);
      rest /= n;
    }
    std::vector<Override>& config = configs.emplace_back();
    for (const SweepParameter& p : spec.parameters) {
      const size_t dim = p.linked_to.value_or(static_cast<size_t>(&p - spec.parameters.data()));
      config.push_back(Override{p.key_path, p.values[value_idx[dim]]});
    }
  }
  return configs;
}

int64_t num_grid_configs(const SweepSpec& spec) {
  int64_t configs = 1;
  for (const SweepParameter& p : spec.parameters) {
    if (!p.linked_to) configs *= static_cast<int64_t>(p.values.size());
  }
  return configs;
}

int64_t runs_per_config(const SweepSpec& spec) {
  return spec.seeds.empty() ? spec.num_replications : static_cast<int64_t>(spec.seeds.size());
}

int64_t num_sweep_runs(const SweepSpec& spec) {
  return num_grid_configs(spec) * runs_per_config(spec);
}

Shard parse_shard(const std::string& text) {
  auto slash = text.find('/');
  auto bad = [&](const std::string& why) -> ConfigError {
    return ConfigError("--shard", 0, 0, "", "'" + text + "': " + why);
  };
  if (slash == std::string::npos) throw bad("expected K/N");
  auto parse = [&](const std::string& s) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      throw bad("expected K/N with positive integers");
    }
    return static_cast<int32_t>(std::stol(s));
  };
  Shard shard{parse(text.substr(0, slash)), parse(text.substr(slash + 1))};
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count) {
    throw bad("need 1 <= K <= N");
  }
  return shard;
}

}  // namespace moesim::sim::study
