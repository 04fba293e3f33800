// Strict JSON field readers for the engine's JSON Lines inputs.
#include "engine/trace_json.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "base/input_file.h"
#include "base/json_depth.h"
#include "base/json_number.h"
#include "engine/input_error.h"

namespace moesim::engine::trace_json {

void Where::fail(const std::string& field, const std::string& reason) const {
  constexpr size_t kMaxReason = 400;
  throw InputError(
      file + ":" + std::to_string(line) + ": " + field + ": " +
      (reason.size() <= kMaxReason ? reason : reason.substr(0, kMaxReason) + "... (cut)"));
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

const json& member(const Where& w, const json& obj, const std::string& path,
                   const std::string& key) {
  if (!obj.is_object()) w.fail(path.empty() ? "record" : path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) w.fail(join(path, key), "missing");
  return *it;
}

// Dumping a container is recursive: a deeply nested value overflowed the stack, and a large one
// made the message hundreds of kilobytes.
std::string describe(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

int64_t as_int(const Where& w, const json& v, const std::string& field, int64_t min_value,
               int64_t max_value) {
  // Through json_integer: get<int64_t>() would wrap an unsigned value above INT64_MAX
  // (18446744073709551615 read as -1).
  const std::optional<int64_t> parsed = json_integer(v);
  if (!parsed) w.fail(field, std::string(json_integer_problem(v)) + ", got " + describe(v));
  const int64_t x = *parsed;
  if (x < min_value) {
    w.fail(field, "must be >= " + std::to_string(min_value) + ", got " + std::to_string(x));
  }
  if (x > max_value) {
    w.fail(field, "must be <= " + std::to_string(max_value) + ", got " + std::to_string(x));
  }
  return x;
}

int64_t int_field(const Where& w, const json& obj, const std::string& path, const std::string& key,
                  int64_t min_value, int64_t max_value) {
  return as_int(w, member(w, obj, path, key), join(path, key), min_value, max_value);
}

int64_t int_field_or(const Where& w, const json& obj, const std::string& path,
                     const std::string& key, int64_t min_value, int64_t fallback,
                     int64_t max_value) {
  if (!obj.contains(key)) return fallback;
  return int_field(w, obj, path, key, min_value, max_value);
}

std::string string_field(const Where& w, const json& obj, const std::string& path,
                         const std::string& key) {
  const json& v = member(w, obj, path, key);
  if (!v.is_string()) w.fail(join(path, key), "expected a string, got " + describe(v));
  return v.get<std::string>();
}

bool bool_field(const Where& w, const json& obj, const std::string& path, const std::string& key) {
  const json& v = member(w, obj, path, key);
  if (!v.is_boolean()) w.fail(join(path, key), "expected true or false, got " + describe(v));
  return v.get<bool>();
}

const json& array_field(const Where& w, const json& obj, const std::string& path,
                        const std::string& key) {
  const json& v = member(w, obj, path, key);
  if (!v.is_array()) w.fail(join(path, key), "expected an array");
  return v;
}

const json& object_field(const Where& w, const json& obj, const std::string& path,
                         const std::string& key) {
  const json& v = member(w, obj, path, key);
  if (!v.is_object()) w.fail(join(path, key), "expected an object");
  return v;
}

void no_unknown_keys(const Where& w, const json& obj, const std::string& path,
                     std::initializer_list<std::string_view> known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool found = false;
    for (std::string_view k : known) found = found || it.key() == k;
    if (found) continue;
    std::string valid;
    for (std::string_view k : known) valid += (valid.empty() ? "" : ", ") + std::string(k);
    std::string key = it.key();
    if (key.size() > 40) key = key.substr(0, 37) + "...";
    w.fail(join(path, key), "unknown key (valid: " + valid + ")");
  }
}

json parse_record(const Where& w, const std::string& line_text) {
  json j;
  try {
    j = parse_json(line_text);
  } catch (const JsonDepthError& e) {
    w.fail("record", std::string("invalid JSON: ") + e.what());
  } catch (const json::parse_error& e) {
    w.fail("record", std::string("invalid JSON: ") + e.what());
  } catch (const json::out_of_range& e) {
    // A number beyond a double (1e400): nlohmann's out_of_range.406.
    w.fail("record", std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) w.fail("record", "expected a JSON object");
  return j;
}

std::string read_data_file(const std::string& path) {
  InputFile file(path, InputKind::kData);
  std::optional<std::string> text = file.ok() ? file.read_all() : std::nullopt;
  if (!text) {
    throw InputError(path + ": " +
                     (file.problem()->missing ? "cannot open" : file.problem()->reason));
  }
  return std::move(*text);
}

}  // namespace moesim::engine::trace_json
