#include "sim/study/sweep_merge.h"

#include <map>
#include <memory>
#include <utility>

#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/study/csv.h"

namespace moesim::sim::study {
namespace {

int64_t parse_index(const std::string& cell, const std::string& file, int line,
                    const std::string& column) {
  if (cell.empty() || cell.size() > 18 ||
      cell.find_first_not_of("0123456789") != std::string::npos) {
    throw ConfigError(file, line, 0, column, "expected an integer >= 0, got '" + cell + "'");
  }
  return std::stoll(cell);
}

}  // namespace

void merge_sweep_csvs(const std::vector<std::string>& paths, std::ostream& out) {
  std::vector<std::unique_ptr<InputFile>> files;
  std::vector<NamedCsv> inputs;
  for (const std::string& path : paths) {
    files.push_back(std::make_unique<InputFile>(path, InputKind::kData));
    if (!files.back()->ok())
      throw_input_problem(path, *files.back()->problem(), "cannot open file");
    inputs.push_back(NamedCsv{path, &files.back()->stream()});
  }
  // A shard that passed the size limit while read was cut: report that, not what the cut made.
  auto check_reads = [&] {
    for (size_t i = 0; i < files.size(); ++i) {
      if (!files[i]->ok()) throw_input_problem(paths[i], *files[i]->problem(), "cannot open file");
    }
  };
  try {
    merge_sweep_csv_streams(inputs, out);
  } catch (const ConfigError&) {
    check_reads();
    throw;
  }
  check_reads();
}

void merge_sweep_csv_streams(const std::vector<NamedCsv>& inputs, std::ostream& out) {
  if (inputs.empty()) throw ConfigError("", 0, 0, "", "no CSV files to merge");
  std::vector<std::string> paths;
  for (const NamedCsv& c : inputs) paths.push_back(c.name);
  std::string header;
  std::string header_file;
  size_t num_columns = 0;
  int64_t num_runs = -1;
  std::map<int64_t, std::pair<std::string, std::string>> rows;  // run_idx -> (line, file:line)
  for (const NamedCsv& input : inputs) {
    const std::string& path = input.name;
    std::istream& in = *input.in;
    std::string line;
    int line_no = 0;
    std::vector<std::string> cells;
    while (std::getline(in, line)) {
      ++line_no;
      if (line_no == 1) {
        if (header_file.empty()) {
          header = line;
          header_file = path;
          if (!split_csv_line(line, cells) || cells.size() < 2 || cells[0] != "run_idx" ||
              cells[1] != "num_runs") {
            throw ConfigError(path, 1, 0, "",
                              "not a sweep CSV (header must start run_idx,num_runs)");
          }
          num_columns = cells.size();
        } else if (line != header) {
          throw ConfigError(path, 1, 0, "", "header differs from the header of " + header_file);
        }
        continue;
      }
      if (line.empty()) continue;
      if (!split_csv_line(line, cells) || cells.size() != num_columns) {
        throw ConfigError(path, line_no, 0, "",
                          "row has " + std::to_string(cells.size()) + " cells, the header " +
                              std::to_string(num_columns));
      }
      int64_t run_idx = parse_index(cells[0], path, line_no, "run_idx");
      int64_t n = parse_index(cells[1], path, line_no, "num_runs");
      if (num_runs < 0) num_runs = n;
      if (n != num_runs) {
        throw ConfigError(path, line_no, 0, "num_runs",
                          std::to_string(n) + " differs from " + std::to_string(num_runs) +
                              " in earlier rows (shards of different sweeps?)");
      }
      if (run_idx >= num_runs) {
        throw ConfigError(path, line_no, 0, "run_idx", "run_idx >= num_runs");
      }
      std::string where = path + ":" + std::to_string(line_no);
      auto [it, inserted] = rows.emplace(run_idx, std::make_pair(line, where));
      if (!inserted) {
        throw ConfigError(path, line_no, 0, "run_idx",
                          "run " + std::to_string(run_idx) + " also at " + it->second.second);
      }
    }
    if (line_no == 0) throw ConfigError(path, 0, 0, "", "empty file (no header)");
  }
  if (num_runs < 0) num_runs = 0;
  if (static_cast<int64_t>(rows.size()) != num_runs) {
    std::string missing;
    int64_t num_missing = 0;
    for (int64_t r = 0; r < num_runs; ++r) {
      if (rows.count(r)) continue;
      if (++num_missing <= 10) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (num_missing > 10) missing += ", ...";
    throw ConfigError(paths.front(), 0, 0, "",
                      std::to_string(num_missing) + " of " + std::to_string(num_runs) +
                          " runs missing: " + missing);
  }
  out << header << "\n";
  for (const auto& [run_idx, row] : rows) out << row.first << "\n";
}

}  // namespace moesim::sim::study
