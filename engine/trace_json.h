// Field readers shared by the engine's JSON Lines readers (step traces, request traces): every
// error is an InputError "FILE:LINE: FIELD: reason", FIELD a JSON path within the record
// ("layers[0].routing[3][1]"), and a quoted value is cut to a readable length. Values are read
// strictly: integers through json_integer (no wrap-around, no fractions), strings and arrays by
// type, a missing field named as such.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace moesim::engine::trace_json {

using nlohmann::json;

// Where a record came from, for messages.
struct Where {
  const std::string& file;
  int64_t line;

  // Throws InputError "FILE:LINE: FIELD: REASON" (a reason over 400 characters is cut).
  [[noreturn]] void fail(const std::string& field, const std::string& reason) const;
};

// "path.key" ("key" at the top level); "path[i]".
std::string join(const std::string& path, const std::string& key);
std::string index(const std::string& path, size_t i);

// A value for a message: a scalar as written (at most 40 characters), a container by its kind.
std::string describe(const json& v);

// obj[key]; fails "missing" (or "expected an object" when obj is none).
const json& member(const Where& w, const json& obj, const std::string& path,
                   const std::string& key);
// An integer in [min_value, max_value].
int64_t as_int(const Where& w, const json& v, const std::string& field, int64_t min_value,
               int64_t max_value = std::numeric_limits<int64_t>::max());
int64_t int_field(const Where& w, const json& obj, const std::string& path, const std::string& key,
                  int64_t min_value, int64_t max_value = std::numeric_limits<int64_t>::max());
// `fallback` when obj has no `key`.
int64_t int_field_or(const Where& w, const json& obj, const std::string& path,
                     const std::string& key, int64_t min_value, int64_t fallback,
                     int64_t max_value = std::numeric_limits<int64_t>::max());
std::string string_field(const Where& w, const json& obj, const std::string& path,
                         const std::string& key);
bool bool_field(const Where& w, const json& obj, const std::string& path, const std::string& key);
const json& array_field(const Where& w, const json& obj, const std::string& path,
                        const std::string& key);
const json& object_field(const Where& w, const json& obj, const std::string& path,
                         const std::string& key);
// Fails on the first key of `obj` not in `known` ("unknown key (valid: ...)").
void no_unknown_keys(const Where& w, const json& obj, const std::string& path,
                     std::initializer_list<std::string_view> known);

// One line of a JSON Lines file as a JSON object (fails "record: invalid JSON: ..." or
// "record: expected a JSON object").
json parse_record(const Where& w, const std::string& line_text);

// The whole file at `path` through InputFile (a data file); throws InputError "PATH: cannot
// open" or "PATH: REASON".
std::string read_data_file(const std::string& path);

}  // namespace moesim::engine::trace_json
