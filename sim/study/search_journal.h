// The journal of a search (`moesim search --journal FILE [--resume]`): a header line naming the
// search, then one line per searched configuration (search_record.h), each fsync'd as soon as the
// configuration is done. A killed search resumed on the same journal takes the configurations it
// holds instead of searching them again; the result is an uninterrupted search's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/io/output_files.h"
#include "sim/study/search.h"

namespace moesim::sim::study {

// What makes two searches the same search: a journal of another one is refused on --resume.
struct SearchJournalHeader {
  bool probe_infeasible = false;
  bool full_probes = false;
  std::optional<double> gpu_price_per_hour;
  std::string scenario_path;
  std::string slo;   // the --slo text as given
  std::string grid;  // the grid file, "" without one
  double min_attainment = 0.99;
  std::optional<int64_t> seed;
  double rel_tolerance = 0.02;
  int32_t max_doublings = 10;
  int32_t replications = 1;
  double max_duration_factor = 1;
  size_t num_configs = 0;
};

class SearchJournal {
 public:
  // Checks that `path` can be written and locks it (bad input naming --journal otherwise).
  // Without `resume`, a journal that holds searched configurations is refused (ConfigError
  // naming how many, --resume and deleting it): starting afresh would discard them. With
  // `resume`, reads the configurations a killed search journaled: a journal whose header differs,
  // or a line that is not a searched configuration, is a ConfigError naming the file and line; a
  // last line cut short by the kill is dropped. Then appends to the journal (the header first
  // when it starts afresh).
  SearchJournal(const std::string& path, const SearchJournalHeader& header, bool resume);

  // With resume: per config_idx, whether the journal holds it (SearchOptions::already_done);
  // else empty.
  const std::vector<bool>& already_done() const { return already_done_; }
  // Appends `c` as one line, flushed and fsync'd (SearchOptions::on_searched).
  void record(const ConfigSearch& c);
  // After the search: throws OutputError when a line could not be written, and fills the
  // configurations read from the journal into `result`. Returns how many there were.
  size_t finish(SearchResult& result);

 private:
  std::string path_;
  std::vector<bool> already_done_;
  std::vector<nlohmann::json> resumed_;
  std::optional<io::JournalFile> file_;
};

}  // namespace moesim::sim::study
