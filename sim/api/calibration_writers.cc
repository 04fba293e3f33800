// The writers of a calibration's result (calibration.h): `moesim calibrate`'s fit summary as
// JSON and as text.
#include "sim/api/calibration.h"
#include "sim/api/text_format.h"

namespace moesim::sim::api {
namespace {

void write_network_and_compute(std::ostream& os, const CalibrateReport& rep) {
  for (const LinkClassFit& f : rep.profile.network.link_classes) {
    os << format_text(
        "  network %-10s efficiency %.3f, latency %.2f us (%lld all-to-alls, EP %d-%d, "
        "MAPE %.1f%%, p99 %.1f%%)\n",
        f.link_class.c_str(), f.efficiency, 1e6 * f.latency_s,
        static_cast<long long>(f.quality.num_samples), f.ep_size_min, f.ep_size_max,
        100 * f.quality.mape, 100 * f.quality.p99_abs_rel_error);
  }
  for (const GemmFit& g : rep.profile.compute.gemms) {
    os << format_text(
        "  gemm %-18s %-4s compute eff. %.3f, input bw eff. %.3f, output bw eff. %.3f "
        "(%lld kernels, MAPE %.1f%%)\n",
        gemm_layout_name(g.layout), g.dtype.c_str(), g.compute_efficiency,
        g.input_bandwidth_efficiency, g.output_bandwidth_efficiency,
        static_cast<long long>(g.quality.num_samples), 100 * g.quality.mape);
  }
  for (const AttentionCoreFit& a : rep.profile.compute.attention) {
    os << format_text("  attention core %-16s %-4s compute eff. %.3f, bandwidth eff. %.3f\n",
                      a.kind.c_str(), a.dtype.c_str(), a.compute_efficiency,
                      a.bandwidth_efficiency);
  }
  for (const ComputeFitRow& r : rep.compute.rows) {
    os << format_text("    %-50s measured %10.2f us, fitted %10.2f us (%+.1f%%)\n", r.what.c_str(),
                      1e6 * r.measured_s, 1e6 * r.fitted_s,
                      100 * (r.fitted_s - r.measured_s) / r.measured_s);
  }
  for (const KernelFit& k : rep.profile.network.kernels) {
    os << format_text(
        "  kernel %-20s over %-6s fixed %.2f us (%lld kernels, EP %d-%d, MAPE %.1f%%, "
        "p99 %.1f%%)\n",
        k.kernel.c_str(), k.transport.c_str(), 1e6 * k.fixed_s,
        static_cast<long long>(k.quality.num_samples), k.ep_size_min, k.ep_size_max,
        100 * k.quality.mape, 100 * k.quality.p99_abs_rel_error);
  }
}

}  // namespace

nlohmann::json calibrate_json(const CalibrateResult& result) {
  const CalibrateReport& rep = result.report;
  const std::string& out = result.out_path;
  nlohmann::json j;
  j["profile"] = out;
  j["records"] = rep.num_records;
  j["used"] = rep.num_used;
  j["unmeasured"] = rep.num_unmeasured;
  j["noisy"] = rep.num_noisy;
  j["flagged_noisy_left_out"] = rep.num_flagged_noisy;
  j["flagged_noisy_kept"] = rep.num_noisy_kept;
  j["skipped"] = rep.skipped;
  for (const OpFit& f : rep.profile.ops) {
    j["fits"].push_back({{"kind", f.kind},
                         {"dtype", f.dtype},
                         {"samples", f.quality.num_samples},
                         {"segments", f.segments.size()},
                         {"r2", f.quality.r2},
                         {"mape", f.quality.mape},
                         {"p99_abs_rel_error", f.quality.p99_abs_rel_error}});
  }
  for (const LinkClassFit& f : rep.profile.network.link_classes) {
    j["network"].push_back({{"link_class", f.link_class},
                            {"efficiency", f.efficiency},
                            {"latency_s", f.latency_s},
                            {"samples", f.quality.num_samples},
                            {"mape", f.quality.mape},
                            {"p99_abs_rel_error", f.quality.p99_abs_rel_error}});
  }
  for (const ComputeFitRow& r : rep.compute.rows) {
    j["compute"].push_back({{"kernel", r.what},
                            {"measured_s", r.measured_s},
                            {"fitted_s", r.fitted_s},
                            {"rel_error", (r.fitted_s - r.measured_s) / r.measured_s}});
  }
  for (const KernelFit& k : rep.profile.network.kernels) {
    j["network_kernels"].push_back({{"kernel", k.kernel},
                                    {"transport", k.transport},
                                    {"fixed_s", k.fixed_s},
                                    {"samples", k.quality.num_samples},
                                    {"mape", k.quality.mape},
                                    {"p99_abs_rel_error", k.quality.p99_abs_rel_error}});
  }
  return j;
}

void write_calibrate_text(std::ostream& os, const CalibrateResult& result) {
  const CalibrateReport& rep = result.report;
  const std::string& out = result.out_path;
  os << format_text("profile %s -> %s (%lld records, %lld fitted, %lld unmeasured, %lld noisy)\n",
                    rep.profile.name.c_str(), out.c_str(), static_cast<long long>(rep.num_records),
                    static_cast<long long>(rep.num_used),
                    static_cast<long long>(rep.num_unmeasured),
                    static_cast<long long>(rep.num_noisy));
  if (rep.num_flagged_noisy > 0 || rep.num_noisy_kept > 0) {
    os << format_text("  engine-flagged noisy records: %lld left out, %lld kept (too few clean)\n",
                      static_cast<long long>(rep.num_flagged_noisy),
                      static_cast<long long>(rep.num_noisy_kept));
  }
  os << format_text("  %-18s %-5s %7s %4s %7s %8s %8s\n", "kind", "dtype", "n", "reg", "R^2",
                    "MAPE", "p99|rel|");
  for (const OpFit& f : rep.profile.ops) {
    os << format_text("  %-18s %-5s %7lld %4zu %7.4f %7.1f%% %7.1f%%\n", f.kind.c_str(),
                      f.dtype.c_str(), static_cast<long long>(f.quality.num_samples),
                      f.segments.size(), f.quality.r2, 100 * f.quality.mape,
                      100 * f.quality.p99_abs_rel_error);
  }
  for (const CollectiveFit& c : rep.profile.collectives) {
    os << format_text("  %-18s %-7s latency %.2f us, %.1f GB/s, MAPE %.1f%%\n", c.op.c_str(),
                      c.link_class.c_str(), 1e6 * c.latency_s, 1e-9 * c.bytes_per_s,
                      100 * c.quality.mape);
  }
  write_network_and_compute(os, rep);
  for (const std::string& s : rep.skipped) os << format_text("  skipped: %s\n", s.c_str());
}

}  // namespace moesim::sim::api
