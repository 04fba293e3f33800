#include "sim/study/collective_study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "base/check.h"
#include "base/number_text.h"
#include "sim/core/distributions.h"
#include "sim/network/hierarchical_traffic.h"

namespace moesim::sim::study {

namespace {

// Parses all of `text` as a finite number into *value; false otherwise.
bool parse_number(std::string_view text, double* value) {
  std::string reason;
  const std::optional<double> parsed = parse_number_text(text, &reason);
  if (parsed) *value = *parsed;
  return parsed.has_value();
}

// A seeded random permutation of 0 .. n-1 (Fisher-Yates).
std::vector<int32_t> permutation(int32_t n, RngStream& rng) {
  std::vector<int32_t> order(n);
  for (int32_t i = 0; i < n; ++i) order[i] = i;
  for (int32_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[rng.uniform_int(static_cast<uint64_t>(i) + 1)]);
  }
  return order;
}

MinMeanMax min_mean_max(const std::vector<double>& values) {
  MinMeanMax out;
  if (values.empty()) return out;
  out.min = *std::min_element(values.begin(), values.end());
  out.max = *std::max_element(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / static_cast<double>(values.size());
  return out;
}

void run_phase(NetworkModel& model, const KernelCost& kernel, CollectivePhase& phase) {
  model.run(phase.traffic, phase.result);
  kernel.apply(phase.result);
  const int32_t p = phase.traffic.size();
  std::vector<double> sent(p), received(p), wait(p);
  for (int32_t i = 0; i < p; ++i) {
    sent[i] = phase.traffic.sent_bytes(i);
    received[i] = phase.traffic.received_bytes(i);
    wait[i] = static_cast<double>(phase.result.barrier_wait_ns[i]);
  }
  phase.sent_bytes = min_mean_max(sent);
  phase.received_bytes = min_mean_max(received);
  phase.barrier_wait_ns = min_mean_max(wait);
}

// Logical counts per rank (mean over ranks, in tokens) of ByteAccounting.
struct LogicalTokens {
  double intranode = 0;
  double internode = 0;
  double low_latency = 0;
};

LogicalTokens logical_tokens(const Topology& topology, const TokenCounts& counts, int32_t top_k) {
  const int32_t p = counts.size();
  LogicalTokens out;
  for (int32_t s = 0; s < p; ++s) {
    const double tokens_src = static_cast<double>(counts.tokens_per_src[s]);
    out.low_latency += tokens_src * top_k;
    for (int32_t d = 0; d < p; ++d) out.intranode += static_cast<double>(counts.at(s, d));
    // (token, node) pairs over every node holding a participant, the source's own included.
    for (int32_t first = 0; first < p;) {
      const NodeId node = topology.node_of(counts.gpus[first]);
      int32_t last = first;
      while (last < p && topology.node_of(counts.gpus[last]) == node) ++last;
      auto tokens_at = [&](int32_t d) { return counts.at(s, d); };
      if (!counts.node_limit.empty()) {
        out.internode += hierarchical_internal::node_limited_estimate(
            counts.node_limit, node.value, tokens_src, first, last, tokens_at);
      } else {
        double not_reached = 1.0;
        for (int32_t d = first; d < last; ++d) {
          if (counts.at(s, d) > 0) {
            not_reached *= 1.0 - static_cast<double>(counts.at(s, d)) / tokens_src;
          }
        }
        out.internode += tokens_src * (1.0 - not_reached);
      }
      first = last;
    }
  }
  out.intranode /= p;
  out.internode /= p;
  out.low_latency /= p;
  return out;
}

void account(const Topology& topology, const LogicalTokens& logical, CollectivePhase& phase) {
  const int32_t p = phase.traffic.size();
  ByteAccounting& a = phase.accounting;
  a.intranode_logical_bytes = logical.intranode * phase.bytes_per_token;
  a.internode_logical_bytes = logical.internode * phase.bytes_per_token;
  a.low_latency_logical_bytes = logical.low_latency * phase.bytes_per_token;
  std::vector<double> nvlink(p, 0.0), network(p, 0.0);
  for (int32_t s = 0; s < p; ++s) {
    for (int32_t d = 0; d < p; ++d) {
      if (d == s) continue;
      const double b = phase.traffic.bytes(s, d);
      if (topology.same_nvlink_domain(phase.traffic.gpu(s), phase.traffic.gpu(d))) {
        nvlink[s] += b;
      } else {
        network[s] += b;
      }
    }
  }
  a.nvlink_sent_bytes = min_mean_max(nvlink);
  a.network_sent_bytes = min_mean_max(network);
}

}  // namespace

std::optional<ExpertSkew> parse_expert_skew(std::string_view text, std::string* error) {
  ExpertSkew skew;
  if (text == "uniform") return skew;
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  double value = 0;
  const bool has_value =
      colon != std::string_view::npos && parse_number(text.substr(colon + 1), &value);
  if (kind == "zipf") {
    if (!has_value || value < 0) {
      *error = "zipf:S needs an exponent S >= 0, got '" + std::string(text) + "'";
      return std::nullopt;
    }
    skew.kind = ExpertSkew::Kind::kZipf;
    skew.zipf_exponent = value;
    return skew;
  }
  if (kind == "hot") {
    if (!has_value || !(value > 0 && value <= 1)) {
      *error = "hot:F needs a token fraction 0 < F <= 1, got '" + std::string(text) + "'";
      return std::nullopt;
    }
    skew.kind = ExpertSkew::Kind::kHot;
    skew.hot_token_fraction = value;
    return skew;
  }
  *error = "unknown skew '" + std::string(text) + "' (valid: uniform, zipf:S, hot:F)";
  return std::nullopt;
}

std::string expert_skew_name(const ExpertSkew& skew) {
  char buf[64];
  switch (skew.kind) {
    case ExpertSkew::Kind::kUniform:
      return "uniform";
    case ExpertSkew::Kind::kZipf:
      std::snprintf(buf, sizeof buf, "zipf:%g", skew.zipf_exponent);
      return buf;
    case ExpertSkew::Kind::kHot:
      std::snprintf(buf, sizeof buf, "hot:%g", skew.hot_token_fraction);
      return buf;
  }
  return "?";
}

std::string check_collective_study_spec(const CollectiveStudySpec& spec, const Topology& topology) {
  if (spec.ep_size < 1 || spec.ep_size > topology.num_gpus()) {
    return "--ep: must be between 1 and the topology's " + std::to_string(topology.num_gpus()) +
           " GPUs";
  }
  if (spec.tokens_per_gpu < 1) return "--tokens-per-gpu: must be >= 1";
  if (spec.hidden < 1) return "--hidden: must be >= 1";
  if (spec.num_experts < 1 || spec.num_experts % spec.ep_size != 0) {
    return "--experts: must be a positive multiple of --ep (" + std::to_string(spec.ep_size) + ")";
  }
  if (spec.top_k < 1 || spec.top_k > spec.num_experts) {
    return "--top-k: must be between 1 and --experts (" + std::to_string(spec.num_experts) + ")";
  }
  if (spec.num_groups < 1 || spec.num_experts % spec.num_groups != 0) {
    return "--expert-groups: must be a positive divisor of --experts (" +
           std::to_string(spec.num_experts) + ")";
  }
  if (spec.topk_groups < 1 || spec.topk_groups > spec.num_groups) {
    return "--topk-groups: must be between 1 and --expert-groups (" +
           std::to_string(spec.num_groups) + ")";
  }
  if (int64_t{spec.topk_groups} * (spec.num_experts / spec.num_groups) < spec.top_k) {
    return "--topk-groups: the kept groups hold fewer experts than --top-k";
  }
  if (spec.transport == LowLatencyTransport::kRdma &&
      spec.algorithm != DispatchAlgorithm::kLowLatency) {
    return "--ll-transport: applies to --algorithm low_latency only";
  }
  if (spec.transport == LowLatencyTransport::kRdma && topology.nvlink_domain_gpus() > 1) {
    return "--ll-transport: rdma runs on the topology with every GPU its own node "
           "(rdma_only_spec)";
  }
  for (const KernelCost* k : {&spec.dispatch_kernel, &spec.combine_kernel}) {
    if (!(k->fixed_s >= 0)) {
      return "--profile: a kernel's fixed cost must be >= 0";
    }
  }
  if (spec.algorithm == DispatchAlgorithm::kHierarchical &&
      spec.ep_size % topology.gpus_per_node() != 0) {
    return "--algorithm: hierarchical needs --ep to be a multiple of the " +
           std::to_string(topology.gpus_per_node()) + " GPUs per node";
  }
  return "";
}

std::vector<double> expert_popularity(const ExpertSkew& skew, int32_t num_experts, int32_t top_k,
                                      RngStream& rng) {
  std::vector<double> popularity(num_experts, 1.0 / num_experts);
  if (skew.kind == ExpertSkew::Kind::kZipf) {
    const std::vector<int32_t> rank = permutation(num_experts, rng);
    double sum = 0;
    for (int32_t e = 0; e < num_experts; ++e) {
      popularity[e] = std::pow(static_cast<double>(rank[e]) + 1.0, -skew.zipf_exponent);
      sum += popularity[e];
    }
    for (double& p : popularity) p /= sum;
  } else if (skew.kind == ExpertSkew::Kind::kHot) {
    const int32_t hot = static_cast<int32_t>(rng.uniform_int(static_cast<uint64_t>(num_experts)));
    // Each token selects the hot expert with probability F, and each selection is one of its k
    // choices: the hot expert's share of all choices is F / k.
    const double hot_share = skew.hot_token_fraction / top_k;
    const double rest = num_experts > 1 ? (1.0 - hot_share) / (num_experts - 1) : 0.0;
    for (int32_t e = 0; e < num_experts; ++e) popularity[e] = e == hot ? hot_share : rest;
    if (num_experts == 1) popularity[0] = 1.0;
  }
  return popularity;
}

TokenCounts draw_token_counts(const Topology& topology, const CollectiveStudySpec& spec) {
  MOESIM_CHECK(check_collective_study_spec(spec, topology).empty(), "invalid collective spec");
  const int32_t p = spec.ep_size;
  RngStream popularity_rng(spec.seed, "collective.popularity");
  const std::vector<double> popularity =
      expert_popularity(spec.skew, spec.num_experts, spec.top_k, popularity_rng);
  const int32_t experts_per_gpu = spec.num_experts / p;
  std::vector<double> gpu_share(p, 0.0);
  std::vector<double> not_reached(p, 1.0);  // prod over experts on the GPU of (1 - x_e)
  for (int32_t e = 0; e < spec.num_experts; ++e) {
    gpu_share[e / experts_per_gpu] += popularity[e];
    not_reached[e / experts_per_gpu] *= 1.0 - std::min(1.0, spec.top_k * popularity[e]);
  }
  // Unique tokens per (token, expert) choice landing on each GPU.
  std::vector<double> tokens_per_choice(p, 0.0);
  for (int32_t d = 0; d < p; ++d) {
    if (gpu_share[d] > 0)
      tokens_per_choice[d] = (1.0 - not_reached[d]) / (spec.top_k * gpu_share[d]);
  }

  TokenCounts counts;
  for (int32_t i = 0; i < p; ++i) counts.gpus.push_back(GpuId(i));
  counts.tokens.assign(static_cast<size_t>(p) * p, 0);
  counts.tokens_per_src.assign(p, spec.tokens_per_gpu);
  RngStream routing_rng(spec.seed, "collective.routing");
  const int64_t num_choices = spec.tokens_per_gpu * spec.top_k;
  std::vector<int64_t> choices(p);
  for (int32_t s = 0; s < p; ++s) {
    multinomial(routing_rng, num_choices, gpu_share, choices);
    for (int32_t d = 0; d < p; ++d) {
      if (choices[d] == 0) continue;
      if (spec.algorithm == DispatchAlgorithm::kLowLatency) {
        counts.tokens[static_cast<size_t>(s) * p + d] = choices[d];
        continue;
      }
      const int64_t unique = std::max<int64_t>(
          1, std::llround(static_cast<double>(choices[d]) * tokens_per_choice[d]));
      counts.tokens[static_cast<size_t>(s) * p + d] =
          std::min({unique, choices[d], spec.tokens_per_gpu});
    }
  }
  return counts;
}

CollectiveStudy run_collective_study(const Topology& topology, NetworkModel& model,
                                     const CollectiveStudySpec& spec) {
  MOESIM_CHECK(spec.transport != LowLatencyTransport::kRdma || topology.nvlink_domain_gpus() == 1,
               "pure-RDMA low-latency traffic runs on rdma_only_spec()");
  CollectiveStudy study;
  study.counts = draw_token_counts(topology, spec);
  if (spec.topk_groups < spec.num_groups) {
    std::vector<int32_t> gpu_of_expert(spec.num_experts);
    for (int32_t e = 0; e < spec.num_experts; ++e) {
      gpu_of_expert[e] = e / (spec.num_experts / spec.ep_size);
    }
    study.counts.node_limit = node_limit_for_groups(topology, study.counts.gpus, gpu_of_expert,
                                                    spec.num_groups, spec.topk_groups, spec.top_k);
  }
  study.dispatch.bytes_per_token = token_bytes(spec.hidden, spec.dispatch_dtype);
  study.combine.bytes_per_token = token_bytes(spec.hidden, spec.combine_dtype);
  build_dispatch_traffic(topology, study.counts, study.dispatch.bytes_per_token, spec.algorithm,
                         study.dispatch.traffic);
  build_combine_traffic(topology, study.counts, study.combine.bytes_per_token, spec.algorithm,
                        study.combine.traffic);
  run_phase(model, spec.dispatch_kernel, study.dispatch);
  run_phase(model, spec.combine_kernel, study.combine);
  // Combine counts the same tokens as dispatch: the transposed pairs.
  const LogicalTokens logical = logical_tokens(topology, study.counts, spec.top_k);
  account(topology, logical, study.dispatch);
  account(topology, logical, study.combine);
  return study;
}

}  // namespace moesim::sim::study
