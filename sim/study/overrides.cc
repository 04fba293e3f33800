#include "sim/study/overrides.h"

#include <charconv>
#include <filesystem>
#include <sstream>

#include "sim/config/input_files.h"
#include "sim/policy/policy_registry.h"

namespace moesim::sim::study {
namespace {

std::vector<std::string> split_key_path(const std::string& file, const std::string& key_path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = key_path.find('.', start);
    std::string part = key_path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (part.empty()) throw ConfigError(file, 0, 0, key_path, "empty segment in key path");
    parts.push_back(std::move(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

void assign(toml::table& table, const std::string& key, const OverrideValue& value) {
  std::visit([&](const auto& v) { table.insert_or_assign(key, v); }, value);
}

void apply_override(toml::table& root, const std::string& file, const Override& o) {
  std::vector<std::string> parts = split_key_path(file, o.key_path);
  toml::table* table = &root;
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix += (i ? "." : "") + parts[i];
    toml::node* child = table->get(parts[i]);
    if (!child) {
      table = table->insert(parts[i], toml::table{}).first->second.as_table();
      continue;
    }
    table = child->as_table();
    if (!table) throw ConfigError(file, 0, 0, o.key_path, prefix + " is not a table");
  }
  if (const toml::node* last = table->get(parts.back()); last && last->is_table()) {
    throw ConfigError(file, 0, 0, o.key_path, "names a table; override a value inside it");
  }
  assign(*table, parts.back(), o.value);
}

}  // namespace

std::string override_value_text(const OverrideValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof(buf), v);
      return std::string(buf, res.ptr);
    }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return v; }
  };
  return std::visit(Visitor{}, value);
}

std::string overrides_text(std::span<const Override> overrides) {
  if (overrides.empty()) return "(base)";
  std::string out;
  for (const Override& o : overrides) {
    if (!out.empty()) out += ", ";
    out += o.key_path + "=" + override_value_text(o.value);
  }
  return out;
}

ScenarioTemplate ScenarioTemplate::load(const std::string& path) {
  const std::string text = read_input_text(path, InputKind::kConfig);
  ScenarioTemplate t;
  t.path_ = path;
  t.base_dir_ = std::filesystem::path(path).parent_path().string();
  try {
    t.root_ = std::make_shared<const toml::table>(toml::parse(text, path));
  } catch (const toml::parse_error& e) {
    throw ConfigError(path, static_cast<int>(e.source().begin.line),
                      static_cast<int>(e.source().begin.column), "",
                      "TOML syntax error: " + std::string(e.description()));
  }
  return t;
}

ScenarioTemplate ScenarioTemplate::from_table(toml::table root, const std::string& name,
                                              const std::string& base_dir) {
  ScenarioTemplate t;
  t.path_ = name;
  t.base_dir_ = base_dir;
  t.from_file_ = false;
  t.root_ = std::make_shared<const toml::table>(std::move(root));
  return t;
}

Override parse_override(const std::string& text, const std::string& what) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw ConfigError(what, 0, 0, "", "'" + text + "' is not KEY.PATH=VALUE");
  }
  Override o;
  o.key_path = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  // An empty key path segment is an error of instantiate(), as for every override.
  // The value as TOML would read it; anything else (e.g. a bare word) is a string.
  o.value = value;
  try {
    const toml::table parsed = toml::parse("v = " + value);
    const toml::node* v = parsed.get("v");
    if (auto i = v->value_exact<int64_t>()) {
      o.value = *i;
    } else if (auto d = v->value_exact<double>()) {
      o.value = *d;
    } else if (auto b = v->value_exact<bool>()) {
      o.value = *b;
    } else if (auto str = v->value_exact<std::string>()) {
      o.value = *str;
    }
  } catch (const toml::parse_error&) {
  }
  return o;
}

std::string ScenarioTemplate::text_with(std::span<const Override> overrides) const {
  toml::table edited = *root_;
  for (const Override& o : overrides) apply_override(edited, path_, o);
  std::ostringstream os;
  os << toml::toml_formatter(edited);
  return os.str();
}

ScenarioTemplate ScenarioTemplate::without(std::span<const std::string> key_paths) const {
  toml::table edited = *root_;
  for (const std::string& key_path : key_paths) {
    const std::vector<std::string> parts = split_key_path(path_, key_path);
    toml::table* table = &edited;
    for (size_t i = 0; i + 1 < parts.size() && table; ++i) {
      toml::node* child = table->get(parts[i]);
      table = child ? child->as_table() : nullptr;
    }
    if (!table || !table->contains(parts.back())) {
      throw ConfigError(path_, 0, 0, key_path, "no such key or table to remove");
    }
    table->erase(parts.back());
  }
  ScenarioTemplate t = *this;
  t.edited_ = t.edited_ || !key_paths.empty();
  t.root_ = std::make_shared<const toml::table>(std::move(edited));
  return t;
}

Scenario ScenarioTemplate::instantiate(std::span<const Override> overrides) const {
  Scenario scenario = [&] {
    if (overrides.empty() && from_file_ && !edited_) return load_scenario(path_);
    std::string text = text_with(overrides);
    try {
      return parse_scenario_text(text, path_, base_dir_);
    } catch (const ConfigError& e) {
      // Errors in the edited scenario itself lose their (re-serialised) line numbers; errors in
      // files it names (model, topology, trace) keep theirs.
      if (e.file() != path_) throw;
      throw ConfigError(path_, 0, 0, e.key_path(),
                        overrides.empty()
                            ? e.reason()
                            : e.reason() + " (with overrides " + overrides_text(overrides) + ")");
    }
  }();
  // Outside the try: policy errors keep the messages make_policies gives them.
  resolve_policy_settings(scenario);
  return scenario;
}

}  // namespace moesim::sim::study
