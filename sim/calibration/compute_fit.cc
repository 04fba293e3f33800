#include "sim/calibration/compute_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

namespace moesim::sim {
namespace {

constexpr double kUnbound = 1e3;  // efficiency of a term the fit left at 0 cost

FitQuality quality_of(const std::vector<double>& measured, const std::vector<double>& fitted) {
  FitQuality q;
  const size_t n = measured.size();
  q.num_samples = static_cast<int64_t>(n);
  if (n == 0) return q;
  std::vector<double> rel;
  double mean = 0, ss_res = 0, ss_tot = 0;
  for (double m : measured) mean += m / static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) {
    const double r = fitted[i] - measured[i];
    rel.push_back(std::abs(r) / measured[i]);
    ss_res += r * r;
    ss_tot += (measured[i] - mean) * (measured[i] - mean);
    q.max_abs_residual_s = std::max(q.max_abs_residual_s, std::abs(r));
  }
  for (double r : rel) q.mape += r / static_cast<double>(n);
  std::sort(rel.begin(), rel.end());
  auto pct = [&rel](double p) {
    const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(rel.size()))) - 1;
    return rel[std::min(i, rel.size() - 1)];
  };
  q.p50_abs_rel_error = pct(0.5);
  q.p99_abs_rel_error = pct(0.99);
  q.rms_residual_s = std::sqrt(ss_res / static_cast<double>(n));
  q.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
  return q;
}

GemmShape shape_of(const GemmSample& s) {
  GemmShape g;
  g.layout = *gemm_layout_from_name(s.layout);
  g.num_groups = static_cast<double>(s.num_groups);
  g.m_per_group = static_cast<double>(s.m_per_group);
  g.n = static_cast<double>(s.n);
  g.k = static_cast<double>(s.k);
  const double b = s.dtype == "fp8" ? 1.0 : 2.0;
  g.activation_bytes_per_element = b;
  g.weight_bytes_per_element = b;
  return g;
}

std::string describe(const GemmSample& s) {
  return s.layout + " g=" + std::to_string(s.num_groups) + " m=" + std::to_string(s.m_per_group) +
         " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + " " + s.dtype;
}

}  // namespace

double profile_dtype_peak(const GpuSpec& gpu, const std::string& dtype) {
  if (dtype == "fp8") return gpu.fp8_flops_per_s;
  if (dtype == "bf16") return gpu.bf16_flops_per_s;
  if (dtype == "fp32") return gpu.fp32_flops_per_s;
  return 0;
}

namespace {

// The non-negative least-squares solution of a x = b over the best subset of a's columns
// (every subset tried; the others' coefficients 0): the smallest residual, earlier subsets on
// ties within 1e-12. Empty when no subset has a finite non-negative solution.
Eigen::VectorXd best_nonnegative_fit(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
  const auto rows = static_cast<int>(a.rows());
  const auto nf = static_cast<int>(a.cols());
  Eigen::VectorXd best;
  double best_sse = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < (1 << nf); ++mask) {
    std::vector<int> cols;
    for (int f = 0; f < nf; ++f) {
      if (mask & (1 << f)) cols.push_back(f);
    }
    if (static_cast<int>(cols.size()) > rows) continue;
    Eigen::MatrixXd sub(rows, static_cast<int>(cols.size()));
    for (size_t j = 0; j < cols.size(); ++j) sub.col(static_cast<int>(j)) = a.col(cols[j]);
    Eigen::VectorXd x = sub.colPivHouseholderQr().solve(b);
    if ((x.array() < 0).any() || !x.allFinite()) continue;
    const double sse = (sub * x - b).squaredNorm();
    if (sse < best_sse * (1.0 - 1e-12)) {
      best_sse = sse;
      best = Eigen::VectorXd::Zero(nf);
      for (size_t j = 0; j < cols.size(); ++j) best(cols[j]) = x(static_cast<int>(j));
    }
  }
  return best;
}

// GEMMs, per dtype: features F/P per layout, I/B per layout, O/B shared (report.calibration.gemms,
// one report row per sample).
void fit_gemms(const std::vector<GemmSample>& gemms, const GpuSpec& gpu, ComputeFitReport& report) {
  ComputeCalibration& c = report.calibration;
  const double hbm = gpu.hbm_bytes_per_s;
  std::map<std::string, std::vector<size_t>> by_dtype;
  for (size_t i = 0; i < gemms.size(); ++i) by_dtype[gemms[i].dtype].push_back(i);
  std::vector<double> gemm_fitted(gemms.size(), 0.0);
  for (const auto& [dtype, idx] : by_dtype) {
    const double peak = profile_dtype_peak(gpu, dtype);
    if (!(peak > 0)) {
      throw std::invalid_argument("GPU '" + gpu.name + "' has no " + dtype + " peak");
    }
    std::vector<GemmLayout> layouts;
    for (size_t i : idx) {
      GemmLayout l = *gemm_layout_from_name(gemms[i].layout);
      if (std::find(layouts.begin(), layouts.end(), l) == layouts.end()) layouts.push_back(l);
    }
    std::sort(layouts.begin(), layouts.end());
    const int nl = static_cast<int>(layouts.size());
    const int nf = 2 * nl + 1;
    const int rows = static_cast<int>(idx.size());
    // Rows scaled by 1 / measured: the residuals are relative errors.
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(rows, nf);
    Eigen::VectorXd b = Eigen::VectorXd::Ones(rows);
    for (int r = 0; r < rows; ++r) {
      const GemmSample& s = gemms[idx[static_cast<size_t>(r)]];
      const GemmShape g = shape_of(s);
      const int l =
          static_cast<int>(std::find(layouts.begin(), layouts.end(), g.layout) - layouts.begin());
      a(r, l) = g.flops() / peak / s.measured_s;
      a(r, nl + l) = g.input_bytes() / hbm / s.measured_s;
      a(r, 2 * nl) = g.output_bytes() / hbm / s.measured_s;
    }
    const Eigen::VectorXd best = best_nonnegative_fit(a, b);
    if (best.size() == 0) {
      report.skipped.push_back("gemm/" + dtype + ": no non-negative fit");
      continue;
    }
    auto eff = [](double coef) { return coef > 1.0 / kUnbound ? 1.0 / coef : kUnbound; };
    for (int l = 0; l < nl; ++l) {
      GemmFit f;
      f.layout = layouts[static_cast<size_t>(l)];
      f.dtype = dtype;
      f.compute_efficiency = eff(best(l));
      f.input_bandwidth_efficiency = eff(best(nl + l));
      f.output_bandwidth_efficiency = eff(best(2 * nl));
      f.m_per_group_min = std::numeric_limits<double>::infinity();
      f.m_per_group_max = 0;
      std::vector<double> measured, fitted;
      for (size_t i : idx) {
        const GemmSample& s = gemms[i];
        const GemmShape g = shape_of(s);
        if (g.layout != f.layout) continue;
        f.m_per_group_min = std::min(f.m_per_group_min, g.m_per_group);
        f.m_per_group_max = std::max(f.m_per_group_max, g.m_per_group);
        gemm_fitted[i] = f.seconds(g, peak, hbm);
        measured.push_back(s.measured_s);
        fitted.push_back(gemm_fitted[i]);
      }
      f.quality = quality_of(measured, fitted);
      c.gemms.push_back(std::move(f));
    }
  }
  for (size_t i = 0; i < gemms.size(); ++i) {
    report.rows.push_back({describe(gemms[i]), gemms[i].measured_s, gemm_fitted[i]});
    const GemmShape g = shape_of(gemms[i]);
    c.gemm_max_bandwidth_efficiency =
        std::max(c.gemm_max_bandwidth_efficiency,
                 (g.input_bytes() + g.output_bytes()) / (gemms[i].measured_s * hbm));
  }
}

// Compute-bound cores with queries and pairs (prefill kernels): seconds = flops (1 + K0 queries
// / pairs) / (peak c), solved as flops / peak u + queries (flops / pairs) / peak v by
// non-negative least squares on relative error (c = 1 / u, K0 = v / u). False when no
// non-negative fit exists.
bool fit_query_overhead(const std::vector<const AttentionCoreSample*>& samples, double peak,
                        AttentionCoreFit& f) {
  const auto rows = static_cast<int>(samples.size());
  Eigen::MatrixXd a(rows, 2);
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(rows);
  f.keys_per_query_min = std::numeric_limits<double>::infinity();
  f.keys_per_query_max = 0;
  for (int r = 0; r < rows; ++r) {
    const AttentionCoreSample& s = *samples[static_cast<size_t>(r)];
    a(r, 0) = s.flops / peak / s.measured_s;
    a(r, 1) = s.queries * (s.flops / s.pairs) / peak / s.measured_s;
    f.keys_per_query_min = std::min(f.keys_per_query_min, s.pairs / s.queries);
    f.keys_per_query_max = std::max(f.keys_per_query_max, s.pairs / s.queries);
  }
  const Eigen::VectorXd x = best_nonnegative_fit(a, b);
  if (x.size() == 0 || !(x(0) > 0)) return false;
  f.compute_efficiency = 1.0 / x(0);
  f.query_overhead_keys = x(1) / x(0);
  std::vector<double> measured, fitted;
  for (const AttentionCoreSample* s : samples) {
    measured.push_back(s->measured_s);
    fitted.push_back(f.seconds(s->flops, 0.0, s->pairs, s->queries, peak, 1.0));
  }
  f.quality = quality_of(measured, fitted);
  return true;
}

// Attention cores, per (kind, dtype): the compute efficiency with a fixed cost per query from
// compute-bound samples with queries and pairs (fit_query_overhead), else averaged over the
// compute-bound samples; the bandwidth efficiency averaged over the memory-bound ones
// (report.calibration.attention, one report row per sample).
void fit_attention_cores(const std::vector<AttentionCoreSample>& cores, const GpuSpec& gpu,
                         ComputeFitReport& report) {
  ComputeCalibration& c = report.calibration;
  const double hbm = gpu.hbm_bytes_per_s;
  std::map<std::pair<std::string, std::string>, std::vector<const AttentionCoreSample*>> groups;
  for (const AttentionCoreSample& s : cores) groups[{s.op, s.dtype}].push_back(&s);
  for (const auto& [key, samples] : groups) {
    const double peak = profile_dtype_peak(gpu, key.second);
    if (!(peak > 0)) {
      throw std::invalid_argument("GPU '" + gpu.name + "' has no " + key.second + " peak");
    }
    AttentionCoreFit f;
    f.kind = key.first;
    f.dtype = key.second;
    double ce = 0, be = 0;
    int nc = 0, nb = 0;
    std::vector<const AttentionCoreSample*> with_pairs;
    for (const AttentionCoreSample* s : samples) {
      if (s->bound == "compute") {
        ce += s->flops / (s->measured_s * peak);
        ++nc;
        if (s->pairs > 0) with_pairs.push_back(s);
      } else {
        be += s->bytes / (s->measured_s * hbm);
        ++nb;
      }
    }
    f.compute_efficiency = nc > 0 ? ce / nc : kUnbound;
    f.bandwidth_efficiency = nb > 0 ? be / nb : -1.0;
    if (nc == 0) report.skipped.push_back(f.kind + "/" + f.dtype + ": no compute-bound record");
    if (!with_pairs.empty()) {
      if (static_cast<int>(with_pairs.size()) != nc) {
        throw std::invalid_argument(f.kind + "/" + f.dtype +
                                    ": compute-bound attention_core records mix those with and "
                                    "without queries and pairs");
      }
      if (!fit_query_overhead(with_pairs, peak, f)) {
        throw std::invalid_argument(f.kind + "/" + f.dtype + ": no non-negative prefill fit");
      }
    }
    c.attention.push_back(f);
  }
  // A core without a memory-bound record reads its cache at the rate another dtype's core of the
  // same kind measured (the same HBM path), else the limit stays unbound.
  for (AttentionCoreFit& f : c.attention) {
    if (f.bandwidth_efficiency >= 0) continue;
    for (const AttentionCoreFit& g : c.attention) {
      if (g.kind == f.kind && g.bandwidth_efficiency >= 0 &&
          !(g.bandwidth_efficiency == kUnbound)) {
        f.bandwidth_efficiency = g.bandwidth_efficiency;
        report.skipped.push_back(f.kind + "/" + f.dtype +
                                 ": no memory-bound record; bandwidth efficiency of " + g.dtype);
        break;
      }
    }
    if (f.bandwidth_efficiency < 0) {
      f.bandwidth_efficiency = kUnbound;
      report.skipped.push_back(f.kind + "/" + f.dtype + ": no memory-bound record");
    }
  }
  for (const AttentionCoreSample& s : cores) {
    const AttentionCoreFit* f = c.find_attention(s.op, s.dtype);
    std::string what = s.op + " " + s.dtype + " " + s.bound + "-bound";
    if (s.pairs > 0) what += " keys/query=" + std::to_string(std::llround(s.pairs / s.queries));
    report.rows.push_back(
        {what, s.measured_s,
         f->seconds(s.flops, s.bytes, s.pairs, s.queries, profile_dtype_peak(gpu, s.dtype), hbm)});
  }
}

}  // namespace

ComputeFitReport fit_compute(const std::vector<GemmSample>& gemms,
                             const std::vector<AttentionCoreSample>& cores, const GpuSpec& gpu) {
  ComputeFitReport report;
  report.calibration.gpu = gpu.name;
  if (!(gpu.hbm_bytes_per_s > 0)) {
    throw std::invalid_argument("GPU '" + gpu.name + "' has no HBM bandwidth");
  }
  fit_gemms(gemms, gpu, report);
  fit_attention_cores(cores, gpu, report);
  return report;
}

}  // namespace moesim::sim
