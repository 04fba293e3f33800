#include "sim/calibration/calibrate.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "moesim_version.h"
#include "sim/calibration/collective_reader.h"

namespace moesim::sim {

std::string cost_kind_of_engine_op(const std::string& engine_op) {
  if (engine_op == "dispatch_a2a" || engine_op == "combine_a2a") return "";
  static const char* kSame[] = {"rmsnorm",          "attn_mla_prefill", "attn_mla_decode",
                                "attn_gqa_prefill", "attn_gqa_decode",  "attn_kda_prefill",
                                "attn_kda_decode",  "router",           "permute",
                                "unpermute",        "expert_ffn",       "shared_expert",
                                "dense_ffn",        "combine",          "lm_head"};
  for (const char* k : kSame) {
    if (engine_op == k) return engine_op;
  }
  return "";
}

std::vector<FitFeature> fit_features_of_kind(const std::string& kind) {
  if (kind == "rmsnorm" || kind == "permute" || kind == "unpermute") return {FitFeature::kBytes};
  return {FitFeature::kFlops, FitFeature::kBytes};
}

namespace {

// The samples split into size groups (CalibrateOptions::min_size_gap), ascending in bytes.
std::vector<std::vector<FitSample>> size_groups(std::vector<FitSample> samples,
                                                const CalibrateOptions& options) {
  std::stable_sort(samples.begin(), samples.end(),
                   [](const FitSample& a, const FitSample& b) { return a.bytes < b.bytes; });
  std::vector<std::vector<FitSample>> out;
  const size_t min_n = static_cast<size_t>(std::max(options.min_samples, 2));
  size_t begin = 0;
  for (size_t i = 1; i <= samples.size(); ++i) {
    bool cut = i == samples.size();
    if (!cut && options.min_size_gap > 0 && samples[i - 1].bytes > 0 &&
        samples[i].bytes >= options.min_size_gap * samples[i - 1].bytes) {
      cut = i - begin >= min_n && samples.size() - i >= min_n;
    }
    if (cut) {
      out.emplace_back(samples.begin() + begin, samples.begin() + i);
      begin = i;
    }
  }
  return out;
}

}  // namespace

double fit_bytes_of(const OpSample& sample) {
  return sample.op == "lm_head" ? sample.weight_bytes : sample.bytes;
}

namespace {

// The measured op records by what they fit. Ordered maps keep the profile stable.
struct GatheredSamples {
  // (kind, dtype) -> samples and the engine ops seen.
  std::map<std::pair<std::string, std::string>, std::vector<FitSample>> groups;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> engine_ops;
  std::map<std::string, std::vector<FitSample>> collectives;  // engine op -> samples
};

// Records the engine flagged noisy, by the fit they would join.
struct NoisySamples {
  std::map<std::pair<std::string, std::string>, std::vector<FitSample>> groups;
  std::map<std::string, std::vector<FitSample>> collectives;
};

// Leaves the flagged records of a fit out when its clean ones are enough to fit
// (options.min_samples); otherwise keeps them all, noted in report.skipped.
template <typename Key>
void settle_noisy(std::map<Key, std::vector<FitSample>>& fits,
                  std::map<Key, std::vector<FitSample>>& noisy, const std::string& name,
                  const Key& key, const CalibrateOptions& options, CalibrateReport& report) {
  std::vector<FitSample>& clean = fits[key];
  const std::vector<FitSample>& flagged = noisy[key];
  if (static_cast<int32_t>(clean.size()) >= options.min_samples) {
    report.num_flagged_noisy += static_cast<int64_t>(flagged.size());
    return;
  }
  report.skipped.push_back(name + ": " + std::to_string(flagged.size()) +
                           " records flagged noisy kept (only " + std::to_string(clean.size()) +
                           " clean)");
  report.num_noisy_kept += static_cast<int64_t>(flagged.size());
  report.num_used += static_cast<int64_t>(flagged.size());
  clean.insert(clean.end(), flagged.begin(), flagged.end());
}

// Every usable op record of `sets` as a fit sample (the record counters, the skipped notes, and
// the profile's measurement files, backend and device in report).
GatheredSamples gather_samples(const std::vector<MeasurementSet>& sets,
                               const CalibrateOptions& options, CalibrateReport& report) {
  CalibrationProfile& p = report.profile;
  GatheredSamples g;
  auto& groups = g.groups;
  auto& engine_ops = g.engine_ops;
  auto& collectives = g.collectives;
  NoisySamples noisy;
  for (const MeasurementSet& m : sets) {
    // File names only: a profile is shipped and must not name the machine's scratch paths.
    p.measurement_files.push_back(std::filesystem::path(m.file).filename().string());
    if (p.backend.empty()) p.backend = m.backend;
    if (p.device.empty()) p.device = m.device;
    for (const OpSample& s : m.ops) {
      ++report.num_records;
      if (!s.measured) {
        ++report.num_unmeasured;
        continue;
      }
      if (s.measured_ns <= 0) continue;
      if (options.max_repeat_spread > 0 &&
          static_cast<double>(s.max_ns - s.min_ns) >
              options.max_repeat_spread * static_cast<double>(s.measured_ns)) {
        ++report.num_noisy;
        continue;
      }
      FitSample f{s.flops, fit_bytes_of(s), static_cast<double>(s.tokens), 1e-9 * s.measured_ns};
      if (s.op == "dispatch_a2a" || s.op == "combine_a2a") {
        if (s.noisy) {
          noisy.collectives[s.op].push_back(f);
          continue;
        }
        collectives[s.op].push_back(f);
        ++report.num_used;
        continue;
      }
      std::string kind = cost_kind_of_engine_op(s.op);
      if (kind.empty()) {
        report.skipped.push_back(s.op + ": unknown engine op (record ignored)");
        continue;
      }
      auto key = std::make_pair(kind, s.dtype);
      auto& names = engine_ops[key];
      if (std::find(names.begin(), names.end(), s.op) == names.end()) names.push_back(s.op);
      if (s.noisy) {
        noisy.groups[key].push_back(f);
        continue;
      }
      groups[key].push_back(f);
      ++report.num_used;
    }
  }
  for (auto& [key, flagged] : noisy.groups) {
    settle_noisy(groups, noisy.groups, key.first + "/" + key.second, key, options, report);
  }
  for (auto& [op, flagged] : noisy.collectives) {
    settle_noisy(collectives, noisy.collectives, op, op, options, report);
  }
  return g;
}

}  // namespace

CalibrateReport calibrate(const std::vector<MeasurementSet>& sets,
                          const CalibrateOptions& options) {
  CalibrateReport report;
  CalibrationProfile& p = report.profile;
  p.moesim_version = MOESIM_VERSION;
  GatheredSamples gathered = gather_samples(sets, options, report);
  auto& groups = gathered.groups;
  auto& engine_ops = gathered.engine_ops;
  auto& collectives = gathered.collectives;
  if (!options.name.empty()) {
    p.name = options.name;
  } else {
    p.name = p.backend.empty() ? "network" : p.backend + "-" + p.device;  // network-only
  }
  std::vector<CollectiveSample> coll = collective_samples_of(sets);
  coll.insert(coll.end(), options.collective_samples.begin(), options.collective_samples.end());
  const bool fit_net = !coll.empty() && options.topology != nullptr;
  const int64_t num_fits =
      static_cast<int64_t>(groups.size() + collectives.size()) + (fit_net ? 1 : 0);
  int64_t fits_done = 0;
  auto fit_done = [&] {
    if (options.progress) options.progress(++fits_done, num_fits);
  };
  for (auto& [key, samples] : groups) {
    if (static_cast<int32_t>(samples.size()) < options.min_samples) {
      report.skipped.push_back(key.first + "/" + key.second + ": " +
                               std::to_string(samples.size()) + " samples (< " +
                               std::to_string(options.min_samples) + ")");
      report.num_used -= static_cast<int64_t>(samples.size());
      fit_done();
      continue;
    }
    for (const std::vector<FitSample>& group : size_groups(std::move(samples), options)) {
      OpFit fit = fit_op(group, fit_features_of_kind(key.first), options.fit);
      fit.kind = key.first;
      fit.dtype = key.second;
      fit.engine_ops = engine_ops[key];
      p.ops.push_back(std::move(fit));
    }
    fit_done();
  }
  for (auto& [op, samples] : collectives) {
    // Counted as it starts: every path out of this iteration is a fit done.
    fit_done();
    if (static_cast<int32_t>(samples.size()) < options.min_samples) {
      report.skipped.push_back(op + ": " + std::to_string(samples.size()) + " measured samples");
      continue;
    }
    FitOptions single = options.fit;
    single.max_segments = 1;
    OpFit fit = fit_op(samples, {FitFeature::kBytes}, single);
    const FitSegment& s = fit.segments.front();
    if (!(s.s_per_byte > 0)) {
      report.skipped.push_back(op + ": time does not grow with bytes (no bandwidth to fit)");
      continue;
    }
    CollectiveFit c;
    c.op = op;
    c.link_class = "local";
    c.latency_s = s.intercept_s;
    c.bytes_per_s = 1.0 / s.s_per_byte;
    c.range = fit.range;
    c.quality = fit.quality;
    p.collectives.push_back(c);
  }
  report.num_collective_samples = static_cast<int64_t>(coll.size());
  if (!coll.empty() && options.topology == nullptr) {
    report.skipped.push_back("network: " + std::to_string(coll.size()) +
                             " measured all-to-alls but no topology to fit them on");
  } else if (!coll.empty()) {
    report.network = fit_network(coll, *options.topology);
    p.network = report.network.calibration;
    for (const std::string& s : report.network.skipped) report.skipped.push_back("network " + s);
    fit_done();
  }
  std::vector<GemmSample> gemms;
  std::vector<AttentionCoreSample> cores;
  for (const MeasurementSet& m : sets) {
    gemms.insert(gemms.end(), m.gemms.begin(), m.gemms.end());
    cores.insert(cores.end(), m.attention_cores.begin(), m.attention_cores.end());
  }
  if ((!gemms.empty() || !cores.empty()) && options.topology == nullptr) {
    report.skipped.push_back("compute: " + std::to_string(gemms.size() + cores.size()) +
                             " kernel records but no topology (GPU peaks) to fit them against");
  } else if (!gemms.empty() || !cores.empty()) {
    report.compute = fit_compute(gemms, cores, options.topology->gpu_spec());
    p.compute = report.compute.calibration;
    for (const std::string& s : report.compute.skipped) report.skipped.push_back("compute " + s);
  }
  return report;
}

}  // namespace moesim::sim
