#include "sim/study/replications.h"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <functional>
#include <optional>

namespace moesim::sim::study {

std::vector<FigureInterval> figure_intervals(const std::vector<const RunSummary*>& runs) {
  using Get = std::function<std::optional<double>(const RunSummary&)>;
  auto pct = [](const Percentiles RunSummary::*p, double Percentiles::*q) {
    return Get([p, q](const RunSummary& s) -> std::optional<double> {
      const Percentiles& x = s.*p;
      if (x.count + x.num_censored == 0) return std::nullopt;
      return x.*q;
    });
  };
  auto rate = [](double RunSummary::*f) {
    return Get([f](const RunSummary& s) -> std::optional<double> {
      if (!s.has.rates) return std::nullopt;
      return s.*f;
    });
  };
  const std::vector<std::pair<FigureInterval, Get>> figures = {
      {{"ttft_p50_ms", "ms"}, pct(&RunSummary::ttft_ms, &Percentiles::p50)},
      {{"ttft_p99_ms", "ms"}, pct(&RunSummary::ttft_ms, &Percentiles::p99)},
      {{"tpot_p50_ms", "ms"}, pct(&RunSummary::tpot_ms, &Percentiles::p50)},
      {{"tpot_p99_ms", "ms"}, pct(&RunSummary::tpot_ms, &Percentiles::p99)},
      {{"output_tokens_per_s", "tokens/s"}, rate(&RunSummary::output_tokens_per_s)},
      {{"requests_per_s", "requests/s"}, rate(&RunSummary::requests_per_s)},
      {{"goodput_req_per_s", "requests/s"}, Get([](const RunSummary& s) -> std::optional<double> {
         if (!s.has.rates) return std::nullopt;
         return s.slo.goodput_req_per_s;
       })},
      {{"slo_attainment", "fraction"}, Get([](const RunSummary& s) -> std::optional<double> {
         if (!s.has.attainment) return std::nullopt;
         return s.slo.attainment;
       })},
  };
  std::vector<FigureInterval> out;
  for (const auto& [proto, get] : figures) {
    FigureInterval f = proto;
    std::vector<double> v;
    for (const RunSummary* s : runs) {
      if (std::optional<double> x = get(*s)) v.push_back(*x);
    }
    f.count = static_cast<int32_t>(v.size());
    if (!v.empty()) {
      double sum = 0;
      for (double x : v) sum += x;
      f.mean = sum / static_cast<double>(v.size());
      f.lo = f.hi = f.mean;
    }
    if (v.size() >= 2) {
      double ss = 0;
      for (double x : v) ss += (x - f.mean) * (x - f.mean);
      const auto n = static_cast<double>(v.size());
      const boost::math::students_t t_dist(n - 1);
      const double hw = boost::math::quantile(boost::math::complement(t_dist, 0.025)) *
                        std::sqrt(ss / (n - 1)) / std::sqrt(n);
      f.lo = f.mean - hw;
      f.hi = f.mean + hw;
    }
    out.push_back(f);
  }
  return out;
}

}  // namespace moesim::sim::study
