#include "sim/workload/azure_trace.h"

#include <charconv>

#include "base/checked_number.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"

namespace moesim::sim {
namespace {

constexpr std::string_view kHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";

// Days since 1970-01-01 of a civil date (H. Hinnant's algorithm).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t days_in_month(int64_t y, int64_t m) {
  static constexpr int64_t kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

// Reads exactly `width` decimal digits at text[pos].
bool read_digits(std::string_view text, size_t pos, size_t width, int64_t& out) {
  if (pos + width > text.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + width; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

struct Field {
  std::string_view text;
  int column = 0;  // 1-based
};

std::vector<Field> split_fields(std::string_view line) {
  std::vector<Field> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    const size_t end = comma == std::string_view::npos ? line.size() : comma;
    fields.push_back(Field{line.substr(start, end - start), static_cast<int>(start) + 1});
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

int64_t parse_tokens(const std::string& file, int line, const Field& f, const char* key) {
  int64_t v = 0;
  const char* end = f.text.data() + f.text.size();
  const auto [ptr, ec] = std::from_chars(f.text.data(), end, v);
  if (f.text.empty() || ec != std::errc() || ptr != end) {
    throw ConfigError(file, line, f.column, key,
                      "expected an integer, got '" + std::string(f.text) + "'");
  }
  if (v < 1) {
    throw ConfigError(file, line, f.column, key, "must be >= 1 (got " + std::to_string(v) + ")");
  }
  return v;
}

}  // namespace

namespace {

// parse_datetime_ns(), telling a well-formed datetime whose nanoseconds overflow int64 (years
// before 1678 or after 2261) apart from a malformed one: *out_of_range is set for the former.
std::optional<int64_t> parse_datetime_ns(std::string_view s, bool* out_of_range) {
  *out_of_range = false;
  int64_t year, month, day, hour, minute, second;
  if (!read_digits(s, 0, 4, year) || s.size() < 19 || s[4] != '-' || !read_digits(s, 5, 2, month) ||
      s[7] != '-' || !read_digits(s, 8, 2, day) || s[10] != ' ' || !read_digits(s, 11, 2, hour) ||
      s[13] != ':' || !read_digits(s, 14, 2, minute) || s[16] != ':' ||
      !read_digits(s, 17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
      minute > 59 || second > 59) {
    return std::nullopt;
  }
  int64_t fraction_ns = 0;
  if (s.size() > 19) {
    const size_t num_digits = s.size() - 20;
    if (s[19] != '.' || num_digits < 1 || num_digits > 9 ||
        !read_digits(s, 20, num_digits, fraction_ns)) {
      return std::nullopt;
    }
    for (size_t i = num_digits; i < 9; ++i) fraction_ns *= 10;
  }
  // Four-digit years keep the seconds far inside int64; their nanoseconds may not.
  const int64_t seconds =
      days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  const std::optional<int64_t> whole_ns = checked_mul(seconds, kNsPerS);
  const std::optional<int64_t> ns = whole_ns ? checked_add(*whole_ns, fraction_ns) : std::nullopt;
  if (!ns) *out_of_range = true;
  return ns;
}

}  // namespace

std::optional<int64_t> parse_datetime_ns(std::string_view s) {
  bool out_of_range = false;
  return parse_datetime_ns(s, &out_of_range);
}

std::vector<TraceRecord> read_azure_trace(std::istream& in, const std::string& name) {
  std::vector<TraceRecord> records;
  std::string text;
  if (!std::getline(in, text)) throw ConfigError(name, 0, 0, "", "trace has no requests");
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.find('\r') != std::string::npos) {
    throw ConfigError(name, 1, 0, "",
                      "lines end in a bare carriage return (old Mac line endings); rows must end "
                      "in \\n or \\r\\n");
  }
  if (text != kHeader) {
    throw ConfigError(name, 1, 1, "",
                      "expected the header '" + std::string(kHeader) + "', got '" + text + "'");
  }
  int64_t origin_ns = 0;
  std::string previous_timestamp;
  int line = 1;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) {
      throw ConfigError(name, line, 0, "", "empty line");
    }
    const std::vector<Field> fields = split_fields(text);
    if (fields.size() != 3) {
      throw ConfigError(name, line, 0, "",
                        "expected 3 comma-separated fields, got " + std::to_string(fields.size()));
    }
    bool out_of_range = false;
    const std::optional<int64_t> t_ns = parse_datetime_ns(fields[0].text, &out_of_range);
    if (out_of_range) {
      throw ConfigError(name, line, fields[0].column, "TIMESTAMP",
                        "datetime '" + std::string(fields[0].text) +
                            "' is outside the years 1678 to 2261 that int64 nanoseconds cover");
    }
    if (!t_ns) {
      throw ConfigError(name, line, fields[0].column, "TIMESTAMP",
                        "invalid datetime '" + std::string(fields[0].text) +
                            "' (expected YYYY-MM-DD HH:MM:SS[.fraction])");
    }
    TraceRecord r;
    r.line = line;
    r.input_tokens = parse_tokens(name, line, fields[1], "ContextTokens");
    r.output_tokens = parse_tokens(name, line, fields[2], "GeneratedTokens");
    if (records.empty()) origin_ns = *t_ns;
    const std::optional<int64_t> since_origin_ns = checked_sub(*t_ns, origin_ns);
    if (!since_origin_ns) {
      throw ConfigError(name, line, fields[0].column, "TIMESTAMP",
                        "timestamp " + std::string(fields[0].text) + " is over 292 years after " +
                            "the first row's (int64 nanoseconds overflow)");
    }
    r.timestamp_ns = *since_origin_ns;
    if (!records.empty() && r.timestamp_ns < records.back().timestamp_ns) {
      throw ConfigError(name, line, fields[0].column, "TIMESTAMP",
                        "timestamp " + std::string(fields[0].text) +
                            " is earlier than the previous row's " + previous_timestamp);
    }
    previous_timestamp = std::string(fields[0].text);
    records.push_back(std::move(r));
  }
  if (records.empty()) throw ConfigError(name, 0, 0, "", "trace has no requests");
  return records;
}

std::vector<TraceRecord> read_azure_trace(const std::string& path) {
  return read_input_stream(path, InputKind::kData, "cannot open trace file",
                           [&](std::istream& in) { return read_azure_trace(in, path); });
}

}  // namespace moesim::sim
