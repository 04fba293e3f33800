// One searched configuration (search.h's ConfigSearch) as a line of JSON: what a search journal
// keeps per configuration (--journal, --resume) and what an MPI rank sends rank 0. The overrides
// are not written (the reader has them from the grid); numbers read back to the same doubles.
#pragma once

#include <nlohmann/json.hpp>

#include "sim/study/rank_group.h"
#include "sim/study/search.h"

namespace moesim::sim::study {

// {"idx": config_idx, "error", "gpus", ..., "probes": [[...], ...]}.
nlohmann::json search_record_json(const ConfigSearch& c);
// Fills `c` (all but config_idx and overrides) from search_record_json's object; throws
// nlohmann::json's exceptions on another shape.
void read_search_record(const nlohmann::json& j, ConfigSearch& c);

// Under an active group, every rank's share of `result` (config_idx % size == rank) goes to
// rank 0, which fills its configurations with them and recomputes the cheapest for `target`.
// Returns false on the other ranks (their result is partial). Collective.
bool gather_search_results(const RankGroup& ranks, SearchResult& result,
                           const std::optional<double>& target_rate_per_s);

}  // namespace moesim::sim::study
