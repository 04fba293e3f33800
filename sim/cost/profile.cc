#include "sim/cost/profile.h"

#include <toml++/toml.h>

#include <cmath>
#include <limits>
#include <ostream>

#include "sim/config/input_files.h"
#include "sim/config/toml_source.h"

namespace moesim::sim {
namespace {

constexpr const char* kSchema = "moesim.profile.v1";

toml::array pair(double lo, double hi) { return toml::array{lo, hi}; }

toml::table quality_table(const FitQuality& q) {
  return toml::table{{"num_samples", q.num_samples},
                     {"r2", q.r2},
                     {"mape", q.mape},
                     {"p50_abs_rel_error", q.p50_abs_rel_error},
                     {"p99_abs_rel_error", q.p99_abs_rel_error},
                     {"rms_residual_s", q.rms_residual_s},
                     {"max_abs_residual_s", q.max_abs_residual_s}};
}

FitQuality read_quality(TomlTable t) {
  FitQuality q;
  q.num_samples = t.get_int_in("num_samples", 0, std::numeric_limits<int64_t>::max());
  q.r2 = t.get_double("r2");
  q.mape = t.get_double_in("mape", 0, std::numeric_limits<double>::max());
  q.p50_abs_rel_error = t.get_double_in("p50_abs_rel_error", 0, std::numeric_limits<double>::max());
  q.p99_abs_rel_error = t.get_double_in("p99_abs_rel_error", 0, std::numeric_limits<double>::max());
  q.rms_residual_s = t.get_double_in("rms_residual_s", 0, std::numeric_limits<double>::max());
  q.max_abs_residual_s =
      t.get_double_in("max_abs_residual_s", 0, std::numeric_limits<double>::max());
  t.finish();
  return q;
}

void read_pair(TomlTable& t, std::string_view key, double& lo, double& hi) {
  std::vector<double> v = t.get_double_array(key);
  if (v.size() != 2 || !(v[0] <= v[1])) t.fail(key, "must be [min, max] with min <= max");
  lo = v[0];
  hi = v[1];
}

// Domains of a segment's coefficients (issue 19): no device does less than 1 FLOP/s or moves
// less than 1 byte/s, and a fixed cost above 1000 s per op or per token (the bound of a
// collective's latency_s) is no kernel. An absurd coefficient would make every op take centuries.
void check_segment(const TomlTable& s, const FitSegment& seg) {
  if (seg.s_per_flop > 1) s.fail("s_per_flop", "must be at most 1 (a device of 1 FLOP/s)");
  if (seg.s_per_byte > 1) s.fail("s_per_byte", "must be at most 1 (a device of 1 byte/s)");
  if (seg.intercept_s > 1e3) s.fail("intercept_s", "must be at most 1000 s");
  if (seg.s_per_token > 1e3) s.fail("s_per_token", "must be at most 1000 s");
}

FitFeature parse_feature(TomlTable& t, const std::string& name) {
  if (name == "flops") return FitFeature::kFlops;
  if (name == "bytes") return FitFeature::kBytes;
  if (name == "tokens") return FitFeature::kTokens;
  t.fail("features", "unknown feature '" + name + "' (valid: flops, bytes, tokens)");
}

}  // namespace

const OpFit* CalibrationProfile::find(std::string_view kind, std::string_view dtype) const {
  for (const OpFit& f : ops) {
    if (f.kind == kind && f.dtype == dtype) return &f;
  }
  return nullptr;
}

const OpFit* CalibrationProfile::find(std::string_view kind, std::string_view dtype,
                                      double bytes) const {
  const OpFit* best = nullptr;
  double best_ratio = std::numeric_limits<double>::infinity();
  for (const OpFit& f : ops) {
    if (f.kind != kind || f.dtype != dtype) continue;
    if (bytes >= f.range.bytes_min && bytes <= f.range.bytes_max) return &f;
    // Distance in ratio to the range (bytes > 0 in every fitted kind; guard zeros).
    const double lo = std::max(f.range.bytes_min, 1.0), hi = std::max(f.range.bytes_max, 1.0);
    const double b = std::max(bytes, 1.0);
    const double ratio = b < lo ? lo / b : b / hi;
    if (ratio < best_ratio) {
      best_ratio = ratio;
      best = &f;
    }
  }
  return best;
}

std::vector<const OpFit*> CalibrationProfile::find_kind(std::string_view kind) const {
  std::vector<const OpFit*> out;
  for (const OpFit& f : ops) {
    if (f.kind == kind) out.push_back(&f);
  }
  return out;
}

void write_profile(std::ostream& os, const CalibrationProfile& p) {
  toml::table root{{"schema", kSchema},
                   {"name", p.name},
                   {"backend", p.backend},
                   {"device", p.device},
                   {"moesim_version", p.moesim_version}};
  toml::array files;
  for (const std::string& f : p.measurement_files) files.push_back(f);
  root.insert("measurements", files);
  if (!p.derived_from.empty()) {
    root.insert("derived_from", p.derived_from);
    root.insert("derivation", p.derivation);
  }
  toml::array ops;
  for (const OpFit& f : p.ops) {
    toml::array engine_ops, features, segments;
    for (const std::string& e : f.engine_ops) engine_ops.push_back(e);
    for (FitFeature x : f.features) features.push_back(fit_feature_name(x));
    for (const FitSegment& s : f.segments) {
      toml::table seg{{"intercept_s", s.intercept_s},
                      {"s_per_flop", s.s_per_flop},
                      {"s_per_byte", s.s_per_byte},
                      {"s_per_token", s.s_per_token}};
      // The last regime is unbounded: its tokens_max is omitted.
      if (std::isfinite(s.tokens_max)) seg.insert("tokens_max", s.tokens_max);
      segments.push_back(std::move(seg));
    }
    ops.push_back(toml::table{
        {"kind", f.kind},
        {"dtype", f.dtype},
        {"engine_ops", engine_ops},
        {"features", features},
        {"range", toml::table{{"flops", pair(f.range.flops_min, f.range.flops_max)},
                              {"bytes", pair(f.range.bytes_min, f.range.bytes_max)},
                              {"tokens", pair(f.range.tokens_min, f.range.tokens_max)}}},
        {"quality", quality_table(f.quality)},
        {"segment", segments}});
  }
  if (!ops.empty()) root.insert("op", ops);  // a network-only profile has none
  toml::array colls;
  for (const CollectiveFit& c : p.collectives) {
    colls.push_back(
        toml::table{{"op", c.op},
                    {"link_class", c.link_class},
                    {"latency_s", c.latency_s},
                    {"bytes_per_s", c.bytes_per_s},
                    {"range", toml::table{{"bytes", pair(c.range.bytes_min, c.range.bytes_max)}}},
                    {"quality", quality_table(c.quality)}});
  }
  if (!colls.empty()) root.insert("collective", colls);
  if (!p.network.empty()) {
    toml::array classes;
    for (const LinkClassFit& f : p.network.link_classes) {
      classes.push_back(
          toml::table{{"link_class", f.link_class},
                      {"efficiency", f.efficiency},
                      {"latency_s", f.latency_s},
                      {"bytes_per_gpu", pair(f.bytes_per_gpu_min, f.bytes_per_gpu_max)},
                      {"ep_size", toml::array{int64_t{f.ep_size_min}, int64_t{f.ep_size_max}}},
                      {"quality", quality_table(f.quality)}});
    }
    toml::array kernels;
    for (const KernelFit& k : p.network.kernels) {
      kernels.push_back(
          toml::table{{"kernel", k.kernel},
                      {"transport", k.transport},
                      {"fixed_s", k.fixed_s},
                      {"ep_size", toml::array{int64_t{k.ep_size_min}, int64_t{k.ep_size_max}}},
                      {"quality", quality_table(k.quality)}});
    }
    toml::table net{{"topology", p.network.topology}};
    if (!classes.empty()) net.insert("link_class", classes);
    if (!kernels.empty()) net.insert("kernel", kernels);
    root.insert("network", net);
  }
  if (!p.compute.empty()) {
    toml::array gemms, attention;
    for (const GemmFit& g : p.compute.gemms) {
      gemms.push_back(toml::table{{"layout", gemm_layout_name(g.layout)},
                                  {"dtype", g.dtype},
                                  {"compute_efficiency", g.compute_efficiency},
                                  {"input_bandwidth_efficiency", g.input_bandwidth_efficiency},
                                  {"output_bandwidth_efficiency", g.output_bandwidth_efficiency},
                                  {"m_per_group", pair(g.m_per_group_min, g.m_per_group_max)},
                                  {"quality", quality_table(g.quality)}});
    }
    for (const AttentionCoreFit& a : p.compute.attention) {
      toml::table t{{"kind", a.kind},
                    {"dtype", a.dtype},
                    {"compute_efficiency", a.compute_efficiency},
                    {"bandwidth_efficiency", a.bandwidth_efficiency}};
      if (a.has_range()) {
        t.insert("query_overhead_keys", a.query_overhead_keys);
        t.insert("keys_per_query", pair(a.keys_per_query_min, a.keys_per_query_max));
        t.insert("quality", quality_table(a.quality));
      }
      attention.push_back(std::move(t));
    }
    toml::table compute{{"gpu", p.compute.gpu}};
    if (p.compute.gemm_max_bandwidth_efficiency > 0) {
      compute.insert("gemm_max_bandwidth_efficiency", p.compute.gemm_max_bandwidth_efficiency);
    }
    if (!gemms.empty()) compute.insert("gemm", gemms);
    if (!attention.empty()) compute.insert("attention_core", attention);
    root.insert("compute", compute);
  }
  if (p.derived_from.empty()) {
    os << "# moesim calibration profile: fitted op costs (docs/calibration.md). Generated by\n"
          "# `moesim calibrate`; edit by re-running it, not by hand.\n";
  } else {
    os << "# moesim calibration profile DERIVED from " << p.derived_from
       << " by hardware ratios, not measured\n"
          "# (docs/calibration.md). Generated by `moesim derive-profile`; edit by re-running it.\n";
  }
  os << root << "\n";
}

namespace {

// One [[op]] fit; `earlier` are the fits read before it (size groups of one kind and dtype must
// ascend).
OpFit read_op_fit(TomlTable& t, const std::vector<OpFit>& earlier) {
  OpFit f;
  f.kind = t.get_string("kind");
  f.dtype = t.get_string("dtype");
  if (t.has("engine_ops")) f.engine_ops = t.get_string_array("engine_ops");
  for (const std::string& x : t.get_string_array("features")) {
    f.features.push_back(parse_feature(t, x));
  }
  TomlTable r = t.get_table("range");
  read_pair(r, "flops", f.range.flops_min, f.range.flops_max);
  read_pair(r, "bytes", f.range.bytes_min, f.range.bytes_max);
  read_pair(r, "tokens", f.range.tokens_min, f.range.tokens_max);
  r.finish();
  f.quality = read_quality(t.get_table("quality"));
  double prev = -std::numeric_limits<double>::infinity();
  std::vector<TomlTable> segs = t.get_table_array("segment");
  for (size_t i = 0; i < segs.size(); ++i) {
    TomlTable& s = segs[i];
    FitSegment seg;
    if (i + 1 < segs.size()) {
      seg.tokens_max = s.get_double("tokens_max");
      if (!(seg.tokens_max > prev)) s.fail("tokens_max", "segments must ascend in tokens_max");
      prev = seg.tokens_max;
    } else if (s.has("tokens_max")) {
      s.fail("tokens_max", "the last segment is unbounded and takes no tokens_max");
    }
    constexpr double kMax = std::numeric_limits<double>::max();
    seg.intercept_s = s.get_double_in("intercept_s", 0, kMax);
    seg.s_per_flop = s.get_double_in("s_per_flop", 0, kMax);
    seg.s_per_byte = s.get_double_in("s_per_byte", 0, kMax);
    seg.s_per_token = s.get_double_in("s_per_token", 0, kMax);
    check_segment(s, seg);
    s.finish();
    f.segments.push_back(seg);
  }
  if (f.segments.empty()) t.fail("segment", "at least one segment is required");
  // Several fits of one (kind, dtype) are size groups: ascending, disjoint byte ranges.
  for (const OpFit& g : earlier) {
    if (g.kind == f.kind && g.dtype == f.dtype && !(g.range.bytes_max < f.range.bytes_min)) {
      t.fail("range", "fits of " + f.kind + "/" + f.dtype +
                          " must have ascending, disjoint byte ranges (size groups)");
    }
  }
  t.finish();
  return f;
}

// One [[collective]] fit.
CollectiveFit read_collective_fit(TomlTable& t) {
  CollectiveFit c;
  c.op = t.get_enum("op", {"dispatch_a2a", "combine_a2a"});
  c.link_class = t.get_enum("link_class", {"local", "network"});
  c.latency_s = t.get_double_in("latency_s", 0, 1e3);
  c.bytes_per_s = t.get_double_in("bytes_per_s", 0, std::numeric_limits<double>::max());
  if (!(c.bytes_per_s >= 1)) t.fail("bytes_per_s", "must be at least 1 (1 byte/s)");
  TomlTable r = t.get_table("range");
  read_pair(r, "bytes", c.range.bytes_min, c.range.bytes_max);
  r.finish();
  c.quality = read_quality(t.get_table("quality"));
  t.finish();
  return c;
}

// An ep_size = [min, max] range, 2 <= min <= max <= 2^20.
void read_ep_range(TomlTable& t, int32_t& min, int32_t& max) {
  std::vector<int64_t> ep = t.get_int_array("ep_size");
  if (ep.size() != 2 || ep[0] < 2 || ep[0] > ep[1] || ep[1] > (1 << 20)) {
    t.fail("ep_size", "must be [min, max] with 2 <= min <= max");
  }
  min = static_cast<int32_t>(ep[0]);
  max = static_cast<int32_t>(ep[1]);
}

// The [network] table: per-link-class and low-latency kernel fits.
NetworkCalibration read_network(TomlTable& net) {
  NetworkCalibration network;
  network.topology = net.get_string_or("topology", "");
  for (TomlTable& t : net.get_table_array("link_class", false)) {
    LinkClassFit f;
    f.link_class = t.get_enum("link_class", {"nvlink", "network"});
    if (network.find(f.link_class)) t.fail("link_class", "duplicate " + f.link_class + " fit");
    f.efficiency = t.get_double_in("efficiency", 1e-9, 1e3);
    f.latency_s = t.get_double_in("latency_s", 0, 1e3);
    read_pair(t, "bytes_per_gpu", f.bytes_per_gpu_min, f.bytes_per_gpu_max);
    read_ep_range(t, f.ep_size_min, f.ep_size_max);
    f.quality = read_quality(t.get_table("quality"));
    t.finish();
    network.link_classes.push_back(std::move(f));
  }
  for (TomlTable& t : net.get_table_array("kernel", false)) {
    KernelFit k;
    k.kernel = t.get_enum("kernel", {kLowLatencyDispatchKernel, kLowLatencyCombineKernel});
    k.transport = t.get_enum("transport", {"nvlink", "rdma"});
    if (network.find_kernel(k.kernel, k.transport)) {
      t.fail("kernel", "duplicate " + k.kernel + " fit over " + k.transport);
    }
    k.fixed_s = t.get_double_in("fixed_s", 0, 1e3);
    read_ep_range(t, k.ep_size_min, k.ep_size_max);
    k.quality = read_quality(t.get_table("quality"));
    t.finish();
    network.kernels.push_back(std::move(k));
  }
  if (network.empty()) net.fail_table("needs a link_class or a kernel fit");
  net.finish();
  return network;
}

// The [compute] table: GEMM and attention-core efficiencies of one GPU.
ComputeCalibration read_compute(TomlTable& compute) {
  ComputeCalibration calibration;
  calibration.gpu = compute.get_string("gpu");
  calibration.gemm_max_bandwidth_efficiency =
      compute.get_double_in_or("gemm_max_bandwidth_efficiency", 1e-6, 1.0, 0.0);
  for (TomlTable& t : compute.get_table_array("gemm", false)) {
    GemmFit g;
    const std::string layout =
        t.get_enum("layout", {"contiguous_grouped", "masked_grouped", "dense"});
    g.layout = *gemm_layout_from_name(layout);
    g.dtype = t.get_enum("dtype", {"fp32", "bf16", "fp8"});
    if (calibration.find_gemm(g.layout, g.dtype)) {
      t.fail("layout", "duplicate " + layout + "/" + g.dtype + " GEMM fit");
    }
    g.compute_efficiency = t.get_double_in("compute_efficiency", 1e-6, 1e3);
    g.input_bandwidth_efficiency = t.get_double_in("input_bandwidth_efficiency", 1e-6, 1e3);
    g.output_bandwidth_efficiency = t.get_double_in("output_bandwidth_efficiency", 1e-6, 1e3);
    read_pair(t, "m_per_group", g.m_per_group_min, g.m_per_group_max);
    g.quality = read_quality(t.get_table("quality"));
    t.finish();
    calibration.gemms.push_back(std::move(g));
  }
  for (TomlTable& t : compute.get_table_array("attention_core", false)) {
    AttentionCoreFit a;
    a.kind = t.get_enum("kind", {"attn_mla_decode", "attn_mla_prefill", "attn_gqa_decode",
                                 "attn_gqa_prefill", "attn_kda_decode", "attn_kda_prefill"});
    a.dtype = t.get_enum("dtype", {"fp32", "bf16", "fp8"});
    if (calibration.find_attention(a.kind, a.dtype)) {
      t.fail("kind", "duplicate " + a.kind + "/" + a.dtype + " attention-core fit");
    }
    a.compute_efficiency = t.get_double_in("compute_efficiency", 1e-6, 1e3);
    a.bandwidth_efficiency = t.get_double_in("bandwidth_efficiency", 1e-6, 1e3);
    if (t.has("keys_per_query")) {
      a.query_overhead_keys = t.get_double_in("query_overhead_keys", 0, 1e9);
      read_pair(t, "keys_per_query", a.keys_per_query_min, a.keys_per_query_max);
      if (!(a.keys_per_query_min >= 1)) t.fail("keys_per_query", "a query attends >= 1 key");
      a.quality = read_quality(t.get_table("quality"));
    }
    t.finish();
    calibration.attention.push_back(std::move(a));
  }
  compute.finish();
  return calibration;
}

}  // namespace

CalibrationProfile parse_profile(std::string_view text, const std::string& name) {
  TomlDocument doc = TomlDocument::parse_string(text, name);
  TomlTable root = doc.root();
  CalibrationProfile p;
  if (root.get_string("schema") != kSchema) {
    root.fail("schema", std::string("expected \"") + kSchema + "\"");
  }
  p.name = root.get_string_or("name", "");
  p.backend = root.get_string_or("backend", "");
  p.device = root.get_string_or("device", "");
  p.moesim_version = root.get_string_or("moesim_version", "");
  if (root.has("measurements")) p.measurement_files = root.get_string_array("measurements");
  p.derived_from = root.get_string_or("derived_from", "");
  p.derivation = root.get_string_or("derivation", "");
  if (p.derived_from.empty() != p.derivation.empty()) {
    root.fail(p.derived_from.empty() ? "derivation" : "derived_from",
              "derived_from and derivation go together (a derived profile names its source and "
              "how it was derived)");
  }
  for (TomlTable& t : root.get_table_array("op", false)) p.ops.push_back(read_op_fit(t, p.ops));
  for (TomlTable& t : root.get_table_array("collective", false)) {
    p.collectives.push_back(read_collective_fit(t));
  }
  if (auto net = root.find_table("network")) p.network = read_network(*net);
  if (auto compute = root.find_table("compute")) p.compute = read_compute(*compute);
  root.finish();
  return p;
}

CalibrationProfile load_profile(const std::string& path) {
  return parse_profile(read_input_text(path, InputKind::kConfig, "cannot open the profile"), path);
}

}  // namespace moesim::sim
