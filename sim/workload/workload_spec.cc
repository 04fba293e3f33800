#include "sim/workload/workload_spec.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "sim/config/input_files.h"
#include "sim/core/horizon.h"
#include "sim/workload/azure_trace.h"
#include "sim/workload/mooncake_trace.h"

namespace moesim::sim {
namespace {

constexpr int64_t kMaxCount = 1'000'000'000'000;
constexpr double kMaxSeconds = 1e9;

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Optional range-checked values. Unlike has(), find_*() records the key as asked, so that an
// unknown-key error lists it among the valid keys.
std::optional<double> find_double_in(TomlTable& t, std::string_view key, double lo, double hi) {
  if (!t.find_double(key)) return std::nullopt;
  return t.get_double_in(key, lo, hi);
}
std::optional<int64_t> find_int_in(TomlTable& t, std::string_view key, int64_t lo, int64_t hi) {
  if (!t.find_int(key)) return std::nullopt;
  return t.get_int_in(key, lo, hi);
}

ValueDistributionSpec parse_distribution(TomlTable& t, std::string_view key, bool integer,
                                         double lowest) {
  TomlTable sub = t.get_table(key);
  return parse_value_distribution(sub, integer, lowest);
}

std::array<double, kNumDomains> parse_domain_mix(TomlTable& t) {
  std::array<double, kNumDomains> mix = {0.0, 0.0, 1.0, 0.0};
  std::optional<TomlTable> sub = t.find_table("domain_mix");
  if (!sub) return mix;
  double sum = 0.0;
  for (int i = 0; i < kNumDomains; ++i) {
    mix[i] = sub->get_double_in_or(domain_name(static_cast<Domain>(i)), 0.0, 1e9, 0.0);
    sum += mix[i];
  }
  sub->finish();
  if (!(sum > 0.0)) t.fail("domain_mix", "weights must have a positive sum");
  return mix;
}

void parse_stop(TomlTable& t, WorkloadSpec& s, std::string_view count_key) {
  std::optional<int64_t>& count = count_key == "num_requests" ? s.num_requests : s.num_sessions;
  count = find_int_in(t, count_key, 1, kMaxCount);
  s.duration_s = find_double_in(t, "duration_s", 1e-9, kMaxSeconds);
  if (!count && !s.duration_s) {
    t.fail_table("needs " + std::string(count_key) + " or duration_s (or both)");
  }
}

void parse_synthetic(TomlTable& t, WorkloadSpec& s) {
  parse_stop(t, s, "num_requests");
  TomlTable arrival = t.get_table("arrival");
  s.synthetic.arrival = parse_arrival(arrival);
  s.synthetic.prompt_tokens = parse_distribution(t, "prompt_tokens", true, 1);
  s.synthetic.output_tokens = parse_distribution(t, "output_tokens", true, 1);
  if (std::optional<TomlTable> reasoning = t.find_table("reasoning_tokens")) {
    s.synthetic.reasoning_tokens = parse_value_distribution(*reasoning, true, 0);
  }
}

void parse_agent(TomlTable& t, WorkloadSpec& s) {
  AgentWorkloadSpec& a = s.agent;
  parse_stop(t, s, "num_sessions");
  TomlTable arrival = t.get_table("arrival");
  a.arrival = parse_arrival(arrival);
  a.turns = parse_distribution(t, "turns", true, 1);
  a.system_prompt_tokens = t.get_int_in_or("system_prompt_tokens", 0, kMaxCount, 0);
  a.first_input_tokens = parse_distribution(t, "first_input_tokens", true, 1);
  a.new_input_tokens = parse_distribution(t, "new_input_tokens", true, 1);
  if (std::optional<TomlTable> reasoning = t.find_table("reasoning_tokens")) {
    a.reasoning_tokens = parse_value_distribution(*reasoning, true, 0);
  }
  a.answer_tokens = parse_distribution(t, "answer_tokens", true, 1);
  a.tool_wait_s = parse_distribution(t, "tool_wait_s", false, 0);
  a.keep_reasoning_in_context = t.get_bool_or("keep_reasoning_in_context", true);
  a.max_context_tokens = find_int_in(t, "max_context_tokens", 1, kMaxCount);
  if (a.max_context_tokens) {
    // Turn 0 must fit; later turns end the session when they would not.
    const ValueDistributionSpec& first = a.first_input_tokens;
    const bool empirical = first.shape == ValueDistributionSpec::Shape::kEmpirical;
    const double first_max =
        empirical ? *std::max_element(first.values.begin(), first.values.end()) : first.max;
    if (!empirical && first.shape != ValueDistributionSpec::Shape::kConstant &&
        first_max >= kValueDistributionNoMax) {
      t.fail("max_context_tokens",
             "needs first_input_tokens.max, so that turn 0 fits (system_prompt_tokens + "
             "first_input_tokens.max <= max_context_tokens)");
    }
    if (static_cast<double>(a.system_prompt_tokens) + first_max >
        static_cast<double>(*a.max_context_tokens)) {
      t.fail("max_context_tokens", "value " + std::to_string(*a.max_context_tokens) +
                                       " is below the largest first prompt: system_prompt_tokens " +
                                       std::to_string(a.system_prompt_tokens) +
                                       " + first_input_tokens up to " + fmt(first_max));
    }
  }
  a.rollback_probability = t.get_double_in_or("rollback_probability", 0.0, 0.99, 0.0);
  a.max_rollbacks_per_turn = t.get_int_in_or("max_rollbacks_per_turn", 0, 1000, 3);
}

// The parsed rows of a trace file, read once per (kind, path, size, modification time) and
// process: a sweep or search parses its scenario again for every run, and reading the 3 MB
// Mooncake conversation trace took ~10% of a probe's time. The last few files are kept.
std::shared_ptr<const std::vector<TraceRecord>> read_trace_rows(WorkloadKind kind,
                                                                const std::string& path) {
  auto read = [&] {
    return std::make_shared<const std::vector<TraceRecord>>(
        kind == WorkloadKind::kMooncake ? read_mooncake_trace(path) : read_azure_trace(path));
  };
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return read();
  const auto mtime = std::filesystem::last_write_time(path, ec);
  if (ec) return read();
  struct Entry {
    WorkloadKind kind;
    std::string path;
    std::uintmax_t size;
    std::filesystem::file_time_type mtime;
    std::shared_ptr<const std::vector<TraceRecord>> rows;
  };
  static std::mutex mu;
  static std::deque<Entry> cache;  // most recent last
  constexpr size_t kMaxEntries = 4;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const Entry& e : cache) {
      if (e.kind == kind && e.path == path && e.size == size && e.mtime == mtime) return e.rows;
    }
  }
  auto rows = read();  // a bad file throws here and is never kept
  std::lock_guard<std::mutex> lock(mu);
  cache.push_back(Entry{kind, path, size, mtime, rows});
  if (cache.size() > kMaxEntries) cache.pop_front();
  return rows;
}

void parse_trace(TomlTable& t, WorkloadSpec& s, const std::string& base_dir) {
  TraceWorkloadSpec& tr = s.trace;
  const std::filesystem::path given = t.get_string("path");
  tr.path = (given.is_relative() ? std::filesystem::path(base_dir) / given : given).string();
  if (const std::optional<InputProblem> problem = input_file_problem(tr.path, InputKind::kData)) {
    t.fail("path", problem->missing
                       ? "cannot open trace file '" + tr.path + "'"
                       : "cannot open trace file (" + problem->reason + "): '" + tr.path + "'");
  }
  const std::string replay = t.get_enum_or("replay", {"window", "loop", "model"}, "window");
  tr.replay = replay == "loop"    ? TraceReplay::kLoop
              : replay == "model" ? TraceReplay::kModel
                                  : TraceReplay::kWindow;
  const std::optional<double> multiplier = find_double_in(t, "rate_multiplier", 1e-6, 1e6);
  tr.rate_multiplier = multiplier.value_or(1.0);
  tr.rate_per_s = find_double_in(t, "rate_per_s", 1e-9, 1e9);
  s.duration_s = find_double_in(t, "duration_s", 1e-9, kMaxSeconds);
  if (tr.replay == TraceReplay::kWindow) {
    if (tr.rate_per_s) {
      t.fail("rate_per_s",
             "needs replay = \"loop\" or \"model\": a window replay is the window's requests "
             "once (scale their times with rate_multiplier)");
    }
    if (s.duration_s) {
      t.fail("duration_s",
             "needs replay = \"loop\" or \"model\": a window replay ends with its last row "
             "(start_s and end_s select the window, in trace time)");
    }
  } else if (multiplier && tr.rate_per_s) {
    t.fail("rate_per_s", "give rate_per_s or rate_multiplier, not both");
  }
  tr.start_s = t.get_double_in_or("start_s", 0.0, kMaxSeconds, 0.0);
  tr.end_s = find_double_in(t, "end_s", 0.0, kMaxSeconds);
  if (tr.end_s) {
    if (*tr.end_s <= tr.start_s) {
      t.fail("end_s",
             "end_s " + fmt(*tr.end_s) + " must be greater than start_s " + fmt(tr.start_s));
    }
  }
  tr.max_requests = find_int_in(t, "max_requests", 1, kMaxCount);
  tr.records = read_trace_rows(s.kind, tr.path);
  // The window must select at least one row.
  const SimTime start_ns = from_seconds(tr.start_s);
  const auto first =
      std::lower_bound(tr.records->begin(), tr.records->end(), start_ns,
                       [](const TraceRecord& r, SimTime t_ns) { return r.timestamp_ns < t_ns; });
  const bool empty =
      first == tr.records->end() || (tr.end_s && first->timestamp_ns >= from_seconds(*tr.end_s));
  if (empty) {
    const std::string window =
        "[" + fmt(tr.start_s) + ", " + (tr.end_s ? fmt(*tr.end_s) : std::string("inf")) + ") s";
    t.fail(tr.end_s ? "end_s" : "start_s",
           "the window " + window + " selects no requests (the trace spans [0, " +
               fmt(to_seconds(tr.records->back().timestamp_ns)) + "] s)");
  }
  if (tr.replay == TraceReplay::kWindow) return;
  const TraceWindow w = select_trace_window(*tr.records, tr.start_s, tr.end_s, tr.max_requests);
  if (w.period_ns <= 0) {
    t.fail("replay", "the window's " + std::to_string(w.num_rows()) +
                         " row(s) give no lap length: give end_s (the window ends there)");
  } else if (w.period_ns > kHorizonNs) {
    t.fail("replay", "the window's lap of " + fmt(to_seconds(w.period_ns)) +
                         " s is past the simulation horizon (" + fmt(to_seconds(kHorizonNs)) +
                         " s): it would never repeat; use replay = \"window\"");
  }
  if (tr.replay == TraceReplay::kModel) {
    tr.model = std::make_shared<const TraceModel>(fit_trace_model(*tr.records, w));
  }
}

// kind = "request_trace": the file only; its rows are the arrivals (no rate, window or domain
// mix applies).
void parse_request_trace(TomlTable& t, WorkloadSpec& s, const std::string& base_dir) {
  const std::filesystem::path given = t.get_string("path");
  s.request_trace_path =
      (given.is_relative() ? std::filesystem::path(base_dir) / given : given).string();
  if (const std::optional<InputProblem> problem =
          input_file_problem(s.request_trace_path, InputKind::kData)) {
    t.fail("path", problem->missing ? "cannot open request trace '" + s.request_trace_path + "'"
                                    : "cannot open request trace (" + problem->reason + "): '" +
                                          s.request_trace_path + "'");
  }
  s.request_trace =
      std::make_shared<const RequestTraceFile>(read_request_trace(s.request_trace_path));
}

}  // namespace

std::string_view workload_kind_name(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kSynthetic:
      return "synthetic";
    case WorkloadKind::kAgent:
      return "agent";
    case WorkloadKind::kMooncake:
      return "mooncake";
    case WorkloadKind::kAzure:
      return "azure";
    case WorkloadKind::kRequestTrace:
      return "request_trace";
  }
  return "?";
}

std::string_view trace_replay_name(TraceReplay replay) {
  switch (replay) {
    case TraceReplay::kWindow:
      return "window";
    case TraceReplay::kLoop:
      return "loop";
    case TraceReplay::kModel:
      return "model";
  }
  return "?";
}

double trace_base_rate_per_s(const TraceWorkloadSpec& spec) {
  switch (spec.replay) {
    case TraceReplay::kWindow:
      return 0.0;
    case TraceReplay::kLoop:
      return select_trace_window(*spec.records, spec.start_s, spec.end_s, spec.max_requests)
          .rate_per_s();
    case TraceReplay::kModel:
      return spec.model->rate_per_s();
  }
  return 0.0;
}

double trace_rate_multiplier(const TraceWorkloadSpec& spec) {
  if (spec.replay == TraceReplay::kWindow || !spec.rate_per_s) return spec.rate_multiplier;
  return *spec.rate_per_s / trace_base_rate_per_s(spec);
}

std::string workload_description(const WorkloadSpec& spec) {
  std::string out(workload_kind_name(spec.kind));
  if (spec.kind == WorkloadKind::kRequestTrace) {
    return out + " " + std::filesystem::path(spec.request_trace_path).filename().string() + " (" +
           std::to_string(spec.request_trace->rows.size()) + " requests)";
  }
  if (spec.kind != WorkloadKind::kMooncake && spec.kind != WorkloadKind::kAzure) return out;
  const TraceWorkloadSpec& tr = spec.trace;
  out += " trace " + std::filesystem::path(tr.path).filename().string() + ", ";
  const std::string window =
      "[" + fmt(tr.start_s) + ", " + (tr.end_s ? fmt(*tr.end_s) : std::string("end")) + ") s" +
      (tr.max_requests ? " (first " + std::to_string(*tr.max_requests) + " rows)" : "");
  const double m = trace_rate_multiplier(tr);
  switch (tr.replay) {
    case TraceReplay::kWindow:
      return out + "window " + window + " replayed once at " + fmt(m) + "x";
    case TraceReplay::kLoop:
    case TraceReplay::kModel:
      break;
  }
  out += tr.replay == TraceReplay::kLoop ? "loop of " : "model of ";
  out += window + " at " + fmt(trace_base_rate_per_s(tr) * m) + " req/s (" + fmt(m) + "x)";
  out += spec.duration_s ? " for " + fmt(*spec.duration_s) + " s" : " sustained";
  return out;
}

WorkloadSpec parse_workload(TomlTable& t, const std::string& base_dir) {
  WorkloadSpec s;
  const std::string kind =
      t.get_enum("kind", {"synthetic", "agent", "mooncake", "azure", "request_trace"});
  if (kind == "request_trace") {
    s.kind = WorkloadKind::kRequestTrace;
    parse_request_trace(t, s, base_dir);
    t.finish();
    return s;
  }
  if (kind == "synthetic") {
    s.kind = WorkloadKind::kSynthetic;
    parse_synthetic(t, s);
  } else if (kind == "agent") {
    s.kind = WorkloadKind::kAgent;
    parse_agent(t, s);
  } else {
    s.kind = kind == "mooncake" ? WorkloadKind::kMooncake : WorkloadKind::kAzure;
    parse_trace(t, s, base_dir);
  }
  s.domain_mix = parse_domain_mix(t);
  t.finish();
  return s;
}

}  // namespace moesim::sim
