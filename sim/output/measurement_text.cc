#include "sim/output/measurement_text.h"

#include <cstdio>
#include <iomanip>
#include <string>

#include "sim/metrics/figure_text.h"

namespace moesim::sim::output {
namespace {

using nlohmann::json;

json num(double v, bool has = true) { return has ? json(clean_double(v)) : json(nullptr); }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string pct(double v) { return v >= 0 ? fmt("%.1f%%", 100 * v) : std::string("n/a"); }

}  // namespace

json percentiles_json(const Percentiles& p) {
  const bool has = p.count + p.num_censored > 0;
  json j{{"p50", num(p.p50, has)},         {"p90", num(p.p90, has)},
         {"p99", num(p.p99, has)},         {"mean", num(p.mean, p.count > 0)},
         {"max", num(p.max, p.count > 0)}, {"count", p.count},
         {"censored", p.num_censored}};
  if (p.lower_bound.p50) j["p50_lower_bound"] = true;
  if (p.lower_bound.p90) j["p90_lower_bound"] = true;
  if (p.lower_bound.p99) j["p99_lower_bound"] = true;
  return j;
}

json measurement_json(const MeasurementSummary& m) {
  auto hw = [](double v) { return v >= 0 ? json(clean_double(v)) : json(nullptr); };
  return json{{"warmup_s", num(m.warmup_s)},
              {"warmup", m.auto_warmup ? "detected (MSER-5)" : "fixed (run.warmup_s)"},
              {"warmup_requests", m.num_warmup_requests},
              {"steady", m.steady},
              {"terminating", m.terminating},
              {"converged", m.converged},
              {"reason", m.reason},
              {"ttft_rel_half_width", hw(m.ttft_rel_half_width)},
              {"tpot_rel_half_width", hw(m.tpot_rel_half_width)},
              {"throughput_rel_half_width", hw(m.throughput_rel_half_width)},
              {"concurrency_rel_half_width", hw(m.concurrency_rel_half_width)},
              {"max_rel_half_width", num(m.max_rel_half_width)},
              {"mean_requests_in_system", num(m.mean_in_system)},
              {"extended_to_s", num(m.extended_to_s, m.extended_to_s > 0)}};
}

void write_measurement_text(std::ostream& os, const MeasurementSummary& m) {
  if (!m.analysed) return;
  if (m.terminating) {
    os << "  measured   every request from " << fmt("%.3f", m.warmup_s)
       << " s: a finite workload (its arrivals ended before the run's last 1/32), no steady "
          "state to detect\n";
    return;
  }
  os << "  measured   " << fmt("%.3f", m.warmup_s) << " s to the end ("
     << (m.auto_warmup ? "warm-up detected by MSER-5" : "warm-up set by run.warmup_s") << ", "
     << m.num_warmup_requests << " requests before it not measured)";
  if (m.extended_to_s > 0) os << ", extended to " << fmt("%.1f", m.extended_to_s) << " s";
  os << "\n             " << (m.converged ? "converged" : "not converged")
     << ": 95% half-widths of the batch means TTFT " << pct(m.ttft_rel_half_width) << ", TPOT "
     << pct(m.tpot_rel_half_width) << " (target " << pct(m.max_rel_half_width) << "); throughput "
     << pct(m.throughput_rel_half_width) << ", requests in system "
     << pct(m.concurrency_rel_half_width) << "\n";
}

void write_latency_row(std::ostream& os, const char* name, const Percentiles& p) {
  // With requests in flight at the end, p50 / p90 / p99 are Kaplan-Meier estimates over them too
  // (">=" marks a lower bound); mean and max are over the observed values.
  const bool has = p.count + p.num_censored > 0;
  os << "  " << std::left << std::setw(14) << name << std::right;
  const bool bound[] = {p.lower_bound.p50, p.lower_bound.p90, p.lower_bound.p99};
  const double q[] = {p.p50, p.p90, p.p99};
  for (int i = 0; i < 3; ++i) {
    os << std::setw(10) << ((bound[i] ? ">=" : "") + (has ? fmt("%.2f", q[i]) : "n/a")) << " ";
  }
  for (double v : {p.mean, p.max}) {
    os << std::setw(10) << (p.count > 0 ? fmt("%.2f", v) : "n/a") << " ";
  }
  os << std::setw(9) << p.count;
  if (p.num_censored > 0) os << " + " << p.num_censored << " in flight";
  os << "\n";
}

}  // namespace moesim::sim::output
