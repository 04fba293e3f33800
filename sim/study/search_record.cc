#include "sim/study/search_record.h"

#include <string>

namespace moesim::sim::study {
namespace {

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
std::optional<double> optional_from(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<double>();
}

nlohmann::json diagnosis_json(const Diagnosis& d) {
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : d.findings) {
    findings.push_back({f.limit, f.num_affected, f.num_counted, f.infeasible, f.text});
  }
  return {d.done,
          d.num_requests,
          d.num_context_too_long,
          d.num_kv_capacity,
          d.longest_prompt_tokens,
          d.longest_prefill_ms,
          d.where,
          findings};
}

Diagnosis diagnosis_from(const nlohmann::json& j) {
  Diagnosis d;
  d.done = j.at(0).get<bool>();
  d.num_requests = j.at(1).get<int64_t>();
  d.num_context_too_long = j.at(2).get<int64_t>();
  d.num_kv_capacity = j.at(3).get<int64_t>();
  d.longest_prompt_tokens = j.at(4).get<int64_t>();
  d.longest_prefill_ms = j.at(5).get<double>();
  d.where = j.at(6).get<std::string>();
  for (const auto& f : j.at(7)) {
    d.findings.push_back({f.at(0).get<std::string>(), f.at(1).get<int64_t>(),
                          f.at(2).get<int64_t>(), f.at(3).get<bool>(), f.at(4).get<std::string>()});
  }
  return d;
}

RateProbe probe_from(const nlohmann::json& p) {
  RateProbe probe;
  probe.multiplier = p.at(0).get<double>();
  probe.rate_per_s = p.at(1).get<double>();
  probe.verdict.meets = p.at(2).get<bool>();
  probe.verdict.num_met = p.at(3).get<int64_t>();
  probe.verdict.num_decided = p.at(4).get<int64_t>();
  probe.verdict.attainment = p.at(5).get<double>();
  probe.verdict.reason = p.at(6).get<std::string>();
  probe.input_tokens_per_s = optional_from(p.at(7));
  probe.output_tokens_per_s = optional_from(p.at(8));
  probe.ttft_p99_ms = optional_from(p.at(9));
  probe.tpot_p99_ms = optional_from(p.at(10));
  if (p.size() > 11) probe.tpot_p50_ms = optional_from(p.at(11));  // absent in older journals
  return probe;
}

}  // namespace

nlohmann::json search_record_json(const ConfigSearch& c) {
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : c.probes) {
    probes.push_back({p.multiplier, p.rate_per_s, p.verdict.meets, p.verdict.num_met,
                      p.verdict.num_decided, p.verdict.attainment, p.verdict.reason,
                      optional_json(p.input_tokens_per_s), optional_json(p.output_tokens_per_s),
                      optional_json(p.ttft_p99_ms), optional_json(p.tpot_p99_ms),
                      optional_json(p.tpot_p50_ms)});
  }
  nlohmann::json reps = nlohmann::json::array();
  for (const MultiplierSearch& r : c.replicates) {
    reps.push_back({r.found, r.max_ok, r.min_fail, r.num_probes});
  }
  return {{"idx", c.config_idx},
          {"error", c.error},
          {"gpus", c.num_gpus},
          {"unit", c.rate_unit},
          {"base", c.base_rate_per_s},
          {"trace_rate", c.trace_rate_per_s},
          {"trace_multiplier", c.trace_multiplier},
          {"price", optional_json(c.price.usd_per_hour)},
          {"price_source", c.price.source},
          {"diagnosis", diagnosis_json(c.diagnosis)},
          {"not_probed", c.not_probed},
          {"found", c.search.found},
          {"max_ok", c.search.max_ok},
          {"min_fail", c.search.min_fail},
          {"n", c.search.num_probes},
          {"max_rate", c.max_rate_per_s},
          {"fail_rate", c.fail_rate_per_s},
          {"reps", reps},
          {"probes", probes}};
}

void read_search_record(const nlohmann::json& j, ConfigSearch& c) {
  c.error = j.at("error").get<std::string>();
  c.num_gpus = j.at("gpus").get<int64_t>();
  c.rate_unit = j.at("unit").get<std::string>();
  c.base_rate_per_s = j.at("base").get<double>();
  c.trace_rate_per_s = j.at("trace_rate").get<double>();
  c.trace_multiplier = j.at("trace_multiplier").get<double>();
  c.price.usd_per_hour = optional_from(j.at("price"));
  c.price.source = j.at("price_source").get<std::string>();
  c.diagnosis = diagnosis_from(j.at("diagnosis"));
  c.not_probed = j.at("not_probed").get<bool>();
  c.search.found = j.at("found").get<bool>();
  c.search.max_ok = j.at("max_ok").get<double>();
  c.search.min_fail = j.at("min_fail").get<double>();
  c.search.num_probes = j.at("n").get<int32_t>();
  c.max_rate_per_s = j.at("max_rate").get<double>();
  c.fail_rate_per_s = j.at("fail_rate").get<double>();
  c.replicates.clear();
  for (const auto& r : j.at("reps")) {
    MultiplierSearch m;
    m.found = r.at(0).get<bool>();
    m.max_ok = r.at(1).get<double>();
    m.min_fail = r.at(2).get<double>();
    m.num_probes = r.at(3).get<int32_t>();
    c.replicates.push_back(m);
  }
  c.probes.clear();
  for (const auto& p : j.at("probes")) c.probes.push_back(probe_from(p));
}

bool gather_search_results(const RankGroup& ranks, SearchResult& result,
                           const std::optional<double>& target_rate_per_s) {
  if (!ranks.active()) return true;
  nlohmann::json mine = nlohmann::json::array();
  for (const auto& c : result.configs) {
    if (c.config_idx % ranks.size() == ranks.rank()) mine.push_back(search_record_json(c));
  }
  const std::vector<std::string> parts = ranks.gather_to_root(mine.dump());
  if (ranks.rank() != 0) return false;
  for (const std::string& part : parts) {
    for (const auto& j : nlohmann::json::parse(part)) {
      read_search_record(j, result.configs.at(j.at("idx").get<size_t>()));
    }
  }
  if (target_rate_per_s) result.cheapest = cheapest_config(result.configs, *target_rate_per_s);
  return true;
}

}  // namespace moesim::sim::study
