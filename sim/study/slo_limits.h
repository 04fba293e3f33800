// The SLO limits of the studies (moesim search --slo, moesim sweep --slo): percentile limits over
// a run's samples, per-request limits and the minimum SLO attainment (met / decided, the one
// definition of docs/outputs.md, "SLO attainment").
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace moesim::sim::study {

struct SearchSlo {
  struct Limit {
    std::string name;  // {ttft,tpot,e2e,queueing}_{p50,p90,p99}_ms
    double limit_ms = 0;
  };
  std::vector<Limit> percentile_limits;  // each must hold
  // Per-request limits for the attainment; absent: the scenario's [slo] ttft_ms / tpot_ms.
  std::optional<double> request_ttft_ms;
  std::optional<double> request_tpot_ms;
  double min_attainment = 0.99;  // in [0, 1]
};

// The limits for people and for the outputs: "ttft_p99_ms<=2000, attainment>=0.99" (percentile
// limits in the order given, then the per-request limits when given, then the attainment).
std::string slo_limits_text(const SearchSlo& slo);

// Parses "NAME=VALUE,NAME=VALUE": percentile limits ("ttft_p99_ms=2000"), per-request limits
// ("ttft_ms=2000", "tpot_ms=100") and "attainment=0.99". Values are positive numbers (attainment
// in [0, 1]). Throws ConfigError (file "--slo") naming the bad item and the valid names.
SearchSlo parse_search_slo(const std::string& text);

}  // namespace moesim::sim::study
