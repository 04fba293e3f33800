// The key-recording reader of the HuggingFace import. Errors carry the line:col of the key's
// first occurrence in the text: nlohmann::json keeps no node positions.
#include "sim/model/hf_json_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/config/config_error.h"

namespace moesim::sim {

using nlohmann::json;

void hf_line_col(std::string_view text, size_t offset, int* line, int* col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

HfJsonReader::HfJsonReader(const json& obj, std::string_view text, std::string file,
                           std::string prefix, const std::set<std::string, std::less<>>* ignored)
    : obj_(obj),
      text_(text),
      file_(std::move(file)),
      prefix_(std::move(prefix)),
      ignored_(ignored) {}

HfJsonReader HfJsonReader::child(const json& obj, const std::string& key,
                                 const std::set<std::string, std::less<>>* ignored) const {
  return HfJsonReader(obj, text_, file_, prefix_ + key + ".", ignored);
}

void HfJsonReader::fail(std::string_view key, const std::string& reason) const {
  int line = 0, col = 0;
  const size_t pos = text_.find("\"" + std::string(key) + "\"");
  if (pos != std::string_view::npos) hf_line_col(text_, pos, &line, &col);
  throw ConfigError(file_, line, col, prefix_ + std::string(key), reason);
}

bool HfJsonReader::has(std::string_view key) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  return it != obj_.end() && !it->is_null();
}

int64_t HfJsonReader::checked_int(std::string_view key, const json& v, int64_t lo,
                                  int64_t hi) const {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    fail(key, "value " + std::to_string(v.get<uint64_t>()) + " is out of range [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  if (!v.is_number_integer()) {
    std::string why = "expected an integer, got " + type_of(v);
    if (v.is_number_float() && !std::isfinite(v.get<double>())) why += " (out of range)";
    fail(key, why);
  }
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) {
    fail(key, "value " + std::to_string(n) + " is out of range [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  }
  return n;
}

int64_t HfJsonReader::get_int(std::string_view key, int64_t lo, int64_t hi,
                              std::optional<int64_t> dflt) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) {
    if (dflt) return *dflt;
    fail(key, "missing required key (integer)");
  }
  return checked_int(key, *it, lo, hi);
}

std::string HfJsonReader::get_string(std::string_view key, std::optional<std::string> dflt) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) {
    if (dflt) return *dflt;
    fail(key, "missing required key (string)");
  }
  if (!it->is_string()) fail(key, "expected a string, got " + type_of(*it));
  return it->get<std::string>();
}

bool HfJsonReader::get_bool(std::string_view key, bool dflt) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) fail(key, "expected a boolean, got " + type_of(*it));
  return it->get<bool>();
}

const json* HfJsonReader::get_object(std::string_view key) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  if (!it->is_object()) fail(key, "expected an object, got " + type_of(*it));
  return &*it;
}

const json* HfJsonReader::get_raw(std::string_view key) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::vector<int64_t> HfJsonReader::get_int_array(std::string_view key, int64_t lo, int64_t hi) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  std::vector<int64_t> out;
  if (it == obj_.end() || it->is_null()) return out;
  if (!it->is_array()) fail(key, "expected an array of integers, got " + type_of(*it));
  for (const json& e : *it) out.push_back(checked_int(key, e, lo, hi));
  return out;
}

std::vector<std::string> HfJsonReader::get_string_array(std::string_view key) {
  asked_.emplace(key);
  auto it = obj_.find(key);
  std::vector<std::string> out;
  if (it == obj_.end() || it->is_null()) return out;
  if (!it->is_array()) fail(key, "expected an array of strings, got " + type_of(*it));
  for (const json& e : *it) {
    if (!e.is_string()) fail(key, "expected an array of strings, found " + type_of(e));
    out.push_back(e.get<std::string>());
  }
  return out;
}

void HfJsonReader::ignore(std::string_view key) { asked_.emplace(key); }

void HfJsonReader::finish() const {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    const std::string& key = it.key();
    if (asked_.count(key) || (ignored_ != nullptr && ignored_->count(key))) continue;
    std::string best;
    int best_d = std::numeric_limits<int>::max();
    for (const auto& a : asked_) {
      const int dist = edit_distance(key, a);
      if (dist < best_d) {
        best_d = dist;
        best = a;
      }
    }
    std::string reason = "unknown key '" + key + "' (not read and not on the ignore list";
    if (!best.empty() && best_d <= std::max<int>(2, static_cast<int>(key.size()) / 3)) {
      reason += "; did you mean '" + best + "'?";
    }
    fail(key, reason + ")");
  }
}

std::string HfJsonReader::type_of(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "float";
  return v.type_name();
}

}  // namespace moesim::sim
