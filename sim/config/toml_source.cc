#include "sim/config/toml_source.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

#include "sim/config/input_files.h"

namespace moesim::sim {
namespace {

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "nothing";
  }
}

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(12);
  os << v;
  return os.str();
}

}  // namespace

TomlTable::TomlTable(const toml::table* table, std::shared_ptr<const std::string> file,
                     std::string path)
    : table_(table), file_(std::move(file)), path_(std::move(path)) {}

std::string TomlTable::key_path(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  return path_ + "." + std::string(key);
}

const toml::node* TomlTable::node(std::string_view key) const { return table_->get(key); }

bool TomlTable::is_array(std::string_view key) const {
  const toml::node* n = node(key);
  return n != nullptr && n->is_array();
}

bool TomlTable::has(std::string_view key) const { return node(key) != nullptr; }

void TomlTable::fail_at(const toml::node* n, std::string_view key,
                        const std::string& reason) const {
  int line = 0, col = 0;
  const toml::node* where = n ? n : table_;
  if (where) {
    line = static_cast<int>(where->source().begin.line);
    col = static_cast<int>(where->source().begin.column);
  }
  throw ConfigError(*file_, line, col, key.empty() ? path_ : key_path(key), reason);
}

void TomlTable::fail(std::string_view key, const std::string& reason) const {
  fail_at(node(key), key, reason);
}

void TomlTable::fail_table(const std::string& reason) const { fail_at(table_, "", reason); }

int64_t TomlTable::get_int(std::string_view key) {
  auto v = find_int(key);
  if (!v) fail(key, "missing required key (integer)");
  return *v;
}

double TomlTable::get_double(std::string_view key) {
  auto v = find_double(key);
  if (!v) fail(key, "missing required key (number)");
  return *v;
}

std::string TomlTable::get_string(std::string_view key) {
  auto v = find_string(key);
  if (!v) fail(key, "missing required key (string)");
  return *v;
}

bool TomlTable::get_bool(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) fail(key, "missing required key (boolean)");
  if (!n->is_boolean()) fail(key, "expected a boolean, got " + type_name(*n));
  return n->as_boolean()->get();
}

std::optional<int64_t> TomlTable::find_int(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_integer()) fail(key, "expected an integer, got " + type_name(*n));
  return n->as_integer()->get();
}

std::optional<double> TomlTable::find_double(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  double v;
  if (n->is_integer()) {
    v = static_cast<double>(n->as_integer()->get());
  } else if (n->is_floating_point()) {
    v = n->as_floating_point()->get();
  } else {
    fail(key, "expected a number, got " + type_name(*n));
  }
  if (!std::isfinite(v)) fail(key, "expected a finite number");
  return v;
}

std::optional<std::string> TomlTable::find_string(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_string()) fail(key, "expected a string, got " + type_name(*n));
  return n->as_string()->get();
}

int64_t TomlTable::get_int_or(std::string_view key, int64_t default_value) {
  return find_int(key).value_or(default_value);
}
double TomlTable::get_double_or(std::string_view key, double default_value) {
  return find_double(key).value_or(default_value);
}
std::string TomlTable::get_string_or(std::string_view key, std::string default_value) {
  auto v = find_string(key);
  return v ? *v : std::move(default_value);
}
bool TomlTable::get_bool_or(std::string_view key, bool default_value) {
  ask(key);
  if (!has(key)) return default_value;
  return get_bool(key);
}

int64_t TomlTable::get_int_in(std::string_view key, int64_t lo, int64_t hi) {
  int64_t v = get_int(key);
  if (v < lo || v > hi) {
    fail(key, "value " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  }
  return v;
}

int64_t TomlTable::get_int_in_or(std::string_view key, int64_t lo, int64_t hi,
                                 int64_t default_value) {
  ask(key);
  if (!has(key)) return default_value;
  return get_int_in(key, lo, hi);
}

double TomlTable::get_double_in(std::string_view key, double lo, double hi) {
  double v = get_double(key);
  if (v < lo || v > hi) {
    fail(key, "value " + format_number(v) + " is out of range [" + format_number(lo) + ", " +
                  format_number(hi) + "]");
  }
  return v;
}

double TomlTable::get_double_in_or(std::string_view key, double lo, double hi,
                                   double default_value) {
  ask(key);
  if (!has(key)) return default_value;
  return get_double_in(key, lo, hi);
}

std::string TomlTable::get_enum(std::string_view key,
                                std::initializer_list<std::string_view> allowed) {
  std::string v = get_string(key);
  std::string list;
  for (auto a : allowed) {
    if (a == v) return v;
    if (!list.empty()) list += ", ";
    list += a;
  }
  fail(key, "unknown value '" + v + "' (valid: " + list + ")");
}

std::string TomlTable::get_enum_or(std::string_view key,
                                   std::initializer_list<std::string_view> allowed,
                                   std::string default_value) {
  ask(key);
  if (!has(key)) return default_value;
  return get_enum(key, allowed);
}

namespace {

template <class T, class Convert>
std::vector<T> read_array(TomlTable& t, const toml::node* n, std::string_view key, const char* what,
                          Convert convert) {
  if (!n->is_array()) t.fail(key, std::string("expected an array of ") + what);
  std::vector<T> out;
  const toml::array& arr = *n->as_array();
  for (size_t i = 0; i < arr.size(); ++i) {
    auto v = convert(arr[i]);
    if (!v) {
      t.fail(key, "element " + std::to_string(i) + " is not " + std::string(what) + " (got " +
                      type_name(arr[i]) + ")");
    }
    out.push_back(*v);
  }
  return out;
}

std::optional<double> as_double(const toml::node& n) {
  if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
  if (n.is_floating_point() && std::isfinite(n.as_floating_point()->get())) {
    return n.as_floating_point()->get();
  }
  return std::nullopt;
}
std::optional<int64_t> as_int(const toml::node& n) {
  if (n.is_integer()) return n.as_integer()->get();
  return std::nullopt;
}
std::optional<std::string> as_string(const toml::node& n) {
  if (n.is_string()) return n.as_string()->get();
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<double>> TomlTable::find_double_array(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  return read_array<double>(*this, n, key, "numbers", as_double);
}

std::optional<std::vector<int64_t>> TomlTable::find_int_array(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  return read_array<int64_t>(*this, n, key, "integers", as_int);
}

std::vector<double> TomlTable::get_double_array(std::string_view key) {
  auto v = find_double_array(key);
  if (!v) fail(key, "missing required key (array of numbers)");
  return *v;
}

std::vector<int64_t> TomlTable::get_int_array(std::string_view key) {
  auto v = find_int_array(key);
  if (!v) fail(key, "missing required key (array of integers)");
  return *v;
}

std::vector<std::string> TomlTable::get_string_array(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) fail(key, "missing required key (array of strings)");
  return read_array<std::string>(*this, n, key, "strings", as_string);
}

std::optional<TomlTable> TomlTable::find_table(std::string_view key) {
  ask(key);
  const toml::node* n = node(key);
  if (!n) return std::nullopt;
  if (!n->is_table()) fail(key, "expected a table, got " + type_name(*n));
  return TomlTable(n->as_table(), file_, key_path(key));
}

TomlTable TomlTable::get_table(std::string_view key) {
  auto t = find_table(key);
  if (!t) fail(key, "missing required table");
  return *t;
}

std::vector<TomlTable> TomlTable::get_table_array(std::string_view key, bool required) {
  ask(key);
  const toml::node* n = node(key);
  std::vector<TomlTable> out;
  if (!n) {
    if (required) fail(key, "missing required array of tables");
    return out;
  }
  if (!n->is_array_of_tables())
    fail(key, "expected an array of tables ([[" + key_path(key) + "]])");
  const toml::array& arr = *n->as_array();
  for (size_t i = 0; i < arr.size(); ++i) {
    out.emplace_back(arr[i].as_table(), file_, key_path(key) + "[" + std::to_string(i) + "]");
  }
  return out;
}

std::vector<std::string> TomlTable::keys() {
  // toml++ keeps keys sorted by name; the contract is file order: sort by source position.
  std::vector<std::tuple<uint32_t, uint32_t, std::string>> found;
  for (const auto& [k, v] : *table_) {
    found.emplace_back(k.source().begin.line, k.source().begin.column, std::string(k.str()));
    ask(k.str());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(std::get<2>(f)));
  return out;
}

void TomlTable::finish() const {
  for (const auto& [k, v] : *table_) {
    std::string key(k.str());
    if (asked_.count(key)) continue;
    std::string best;
    int best_d = std::numeric_limits<int>::max();
    for (const auto& a : asked_) {
      int d = edit_distance(key, a);
      if (d < best_d) {
        best_d = d;
        best = a;
      }
    }
    std::string reason = "unknown key '" + key + "'";
    if (!best.empty() && best_d <= std::max<int>(2, static_cast<int>(key.size()) / 3)) {
      reason += " (did you mean '" + best + "'?)";
    } else if (!asked_.empty()) {
      std::string list;
      for (const auto& a : asked_) list += (list.empty() ? "" : ", ") + a;
      reason += " (valid keys: " + list + ")";
    }
    throw ConfigError(*file_, static_cast<int>(k.source().begin.line),
                      static_cast<int>(k.source().begin.column), key_path(key), reason);
  }
}

TomlDocument::TomlDocument() = default;
TomlDocument::TomlDocument(TomlDocument&&) noexcept = default;
TomlDocument& TomlDocument::operator=(TomlDocument&&) noexcept = default;
TomlDocument::~TomlDocument() = default;

TomlDocument TomlDocument::parse_string(std::string_view text, const std::string& name) {
  TomlDocument doc;
  doc.file_ = std::make_shared<const std::string>(name);
  try {
    doc.table_ = std::make_unique<toml::table>(toml::parse(text, name));
  } catch (const toml::parse_error& e) {
    throw ConfigError(name, static_cast<int>(e.source().begin.line),
                      static_cast<int>(e.source().begin.column), "",
                      "TOML syntax error: " + std::string(e.description()));
  }
  return doc;
}

TomlDocument TomlDocument::load_file(const std::string& path) {
  return parse_string(read_input_text(path, InputKind::kConfig), path);
}

TomlTable TomlDocument::root() const { return TomlTable(table_.get(), file_, ""); }

}  // namespace moesim::sim
