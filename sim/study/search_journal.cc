#include "sim/study/search_journal.h"

#include <optional>

#include "base/json_depth.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/study/search_record.h"

namespace moesim::sim::study {
namespace {

std::string header_line(const SearchJournalHeader& h) {
  nlohmann::json header = {
      {"moesim_search_journal", 3},
      {"probe_infeasible", h.probe_infeasible},
      {"full_probes", h.full_probes},
      {"gpu_price_per_hour",
       h.gpu_price_per_hour ? nlohmann::json(*h.gpu_price_per_hour) : nlohmann::json(nullptr)},
      {"scenario", h.scenario_path},
      {"slo", h.slo},
      {"grid", h.grid},
      {"min_attainment", h.min_attainment},
      {"seed", h.seed ? nlohmann::json(*h.seed) : nlohmann::json(nullptr)},
      {"tolerance", h.rel_tolerance},
      {"max_doublings", h.max_doublings},
      {"replications", h.replications},
      {"max_duration_factor", h.max_duration_factor},
      {"num_configs", h.num_configs}};
  return header.dump() + "\n";
}

}  // namespace

SearchJournal::SearchJournal(const std::string& path, const SearchJournalHeader& header,
                             bool resume)
    : path_(path) {
  const std::string header_text = header_line(header);
  io::check_output_file(path, "--journal");
  file_.emplace(path, "--journal");  // locked before it is read
  int64_t keep_bytes = 0;
  if (!resume) {
    if (const int64_t num_records = io::num_journal_records(path); num_records > 0) {
      throw ConfigError(path, 0, 0, "--journal",
                        "holds " + std::to_string(num_records) + " searched configuration" +
                            (num_records == 1 ? "" : "s") +
                            ": add --resume to continue from them, or delete the file to start "
                            "over");
    }
  } else {
    InputFile in(path, InputKind::kData);  // a missing journal starts empty
    const std::optional<std::string> read = in.ok() ? in.read_all() : std::nullopt;
    if (!read && !in.problem()->missing) throw_input_problem(path, *in.problem(), "");
    const std::string text = read.value_or("");
    if (!text.empty() && text.compare(0, header_text.size(), header_text) != 0) {
      throw ConfigError(path, 1, 0, "", "the journal of another search (its header differs)");
    }
    size_t at = text.size() >= header_text.size() ? header_text.size() : 0;
    int line = 1;
    already_done_.assign(header.num_configs, false);
    while (at > 0 && at < text.size()) {
      const size_t end = text.find('\n', at);
      if (end == std::string::npos) break;  // cut short by a kill
      ++line;
      nlohmann::json j;
      try {
        j = parse_json(text.substr(at, end - at), false);
      } catch (const JsonDepthError& e) {
        throw ConfigError(path, line, 0, "", e.what());
      }
      if (j.is_discarded() || !j.is_object() || !j.contains("idx") ||
          !j["idx"].is_number_unsigned() || j["idx"].get<size_t>() >= header.num_configs) {
        throw ConfigError(path, line, 0, "", "not a searched configuration");
      }
      already_done_[j["idx"].get<size_t>()] = true;
      resumed_.push_back(std::move(j));
      at = end + 1;
    }
    keep_bytes = resumed_.empty() ? 0 : static_cast<int64_t>(at);
  }
  file_->start(keep_bytes);
  if (keep_bytes == 0) file_->stream() << header_text << std::flush;
}

void SearchJournal::record(const ConfigSearch& c) {
  file_->stream() << search_record_json(c).dump() << "\n" << std::flush;
}

size_t SearchJournal::finish(SearchResult& result) {
  file_->check();
  if (!file_->stream()) throw io::OutputError("cannot write " + path_);
  for (const nlohmann::json& j : resumed_) {
    read_search_record(j, result.configs.at(j["idx"].get<size_t>()));
  }
  return resumed_.size();
}

}  // namespace moesim::sim::study
