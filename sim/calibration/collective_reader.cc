#include "sim/calibration/collective_reader.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "sim/config/config_error.h"
#include "sim/config/input_files.h"

namespace moesim::sim {

std::vector<CollectiveSample> parse_nccl_tests_alltoall(std::string_view text,
                                                        const std::string& name,
                                                        int32_t num_ranks) {
  std::istringstream in{std::string(text)};
  std::string line;
  int32_t rank_lines = 0;
  std::vector<std::pair<double, double>> rows;  // (size bytes, out-of-place time us)
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string first;
    if (!(words >> first)) continue;
    if (first == "#") {
      std::string second;
      if (words >> second && second == "Rank") ++rank_lines;
      continue;
    }
    if (first[0] == '#') continue;
    // size count type redop root time algbw busbw #wrong ...
    std::vector<std::string> f{first};
    for (std::string w; words >> w;) f.push_back(w);
    if (f.size() < 8) continue;
    try {
      size_t used = 0;
      const double size = std::stod(f[0], &used);
      if (used != f[0].size()) continue;
      const double time_us = std::stod(f[5], &used);
      if (used != f[5].size()) continue;
      if (size > 0 && time_us > 0) rows.push_back({size, time_us});
    } catch (const std::exception&) {
      continue;  // not a result line
    }
  }
  const int32_t n = num_ranks > 0 ? num_ranks : rank_lines;
  if (n < 2) {
    throw ConfigError(name, 0, 0, "",
                      "alltoall_perf output: " + std::to_string(n) +
                          " ranks (at least 2 needed; give the rank count when the \"# Rank\" "
                          "lines are missing)");
  }
  if (rows.empty()) throw ConfigError(name, 0, 0, "", "alltoall_perf output: no result lines");
  std::vector<CollectiveSample> out;
  const std::string source = "nccl-tests:" + std::filesystem::path(name).filename().string();
  for (const auto& [size, time_us] : rows) {
    CollectiveSample c;
    c.source = source;
    c.ep_size = n;
    c.bytes_per_gpu = size * (n - 1) / n;
    c.measured_s = 1e-6 * time_us;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<CollectiveSample> read_nccl_tests_alltoall(const std::string& path, int32_t num_ranks) {
  return parse_nccl_tests_alltoall(
      read_input_text(path, InputKind::kData, "cannot open the nccl-tests output"), path,
      num_ranks);
}

std::vector<CollectiveSample> collective_samples_of(const std::vector<MeasurementSet>& sets) {
  std::vector<CollectiveSample> out;
  for (const MeasurementSet& m : sets)
    out.insert(out.end(), m.collectives.begin(), m.collectives.end());
  // GPUs played per trace, over every file that replayed it.
  std::map<std::string, std::set<int32_t>> gpus_of_trace;
  for (const MeasurementSet& m : sets) {
    gpus_of_trace[m.trace_file].insert(m.sim_gpus.begin(), m.sim_gpus.end());
  }
  struct Group {
    double bytes = 0;
    int64_t max_ns = 0;
  };
  using Key = std::tuple<std::string, int32_t, int64_t, int32_t, std::string>;
  std::map<Key, Group> groups;
  for (const MeasurementSet& m : sets) {
    for (const OpSample& s : m.ops) {
      if (!s.measured || s.measured_ns <= 0) continue;
      if (s.op != "dispatch_a2a" && s.op != "combine_a2a") continue;
      Group& g = groups[{m.trace_file, s.replica, s.step, s.layer_idx, s.op}];
      g.bytes += s.bytes;
      g.max_ns = std::max(g.max_ns, s.measured_ns);
    }
  }
  for (const auto& [key, g] : groups) {
    const std::string& trace = std::get<0>(key);
    const int32_t ep = static_cast<int32_t>(gpus_of_trace[trace].size());
    if (ep < 2 || !(g.bytes > 0)) continue;
    CollectiveSample c;
    c.source = "engine:" + std::filesystem::path(trace).filename().string();
    c.ep_size = ep;
    c.bytes_per_gpu = g.bytes / (2.0 * ep);
    c.measured_s = 1e-9 * static_cast<double>(g.max_ns);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace moesim::sim
