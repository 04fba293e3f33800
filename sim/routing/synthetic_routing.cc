#include "sim/routing/synthetic_routing.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "base/check.h"
#include "sim/core/distributions.h"
#include "sim/routing/count_draws.h"

namespace moesim::sim {

struct SyntheticRoutingModel::LayerState {
  int32_t moe_layer_idx = 0;
  int64_t cached_epoch = -1;
  std::shared_ptr<SyntheticPopularity::Epoch> epoch;  // the layer's shares in cached_epoch
  // Per domain, built on first per-token use in the epoch (a sampler keeps state: one per model).
  std::vector<std::unique_ptr<TokenSampler>> samplers;
  // The destination shares of the layer's last call (in `epoch`), and that call's
  // RoutingQuery::placement_version (0: not known).
  std::shared_ptr<SyntheticPopularity::GpuShares> gpu;
  uint64_t gpu_placement_version = 0;
};

namespace {

// A short stream name (fits std::string's small-buffer storage: no allocation per call).
// Formatted with to_chars (printf's "%c%d.%lld": the same characters, without its locale and
// format parsing, once per layer and step).
std::string draw_stream_name(char tag, int32_t layer_idx, int64_t step_idx) {
  char buf[32];
  buf[0] = tag;
  char* end = std::to_chars(buf + 1, buf + 12, layer_idx).ptr;  // an int32 takes <= 11 chars
  *end++ = '.';
  end = std::to_chars(end, buf + sizeof(buf), step_idx).ptr;
  return std::string(buf, end);
}

}  // namespace

SyntheticRoutingModel::SyntheticRoutingModel(const RoutingShape& shape, RoutingSpec spec,
                                             uint64_t seed)
    : SyntheticRoutingModel(std::make_shared<SyntheticPopularity>(shape, std::move(spec), seed),
                            seed) {}

SyntheticRoutingModel::SyntheticRoutingModel(std::shared_ptr<SyntheticPopularity> popularity,
                                             uint64_t draw_seed)
    : popularity_(std::move(popularity)),
      shape_(popularity_->shape()),
      spec_(popularity_->spec()),
      draw_seed_(draw_seed),
      layers_(static_cast<size_t>(shape_.num_moe_layers)) {
  for (int32_t l = 0; l < shape_.num_moe_layers; ++l) layers_[l].moe_layer_idx = l;
  domain_tokens_.assign(spec_.num_domains(), 0);
}

SyntheticRoutingModel::~SyntheticRoutingModel() = default;

int64_t SyntheticRoutingModel::epoch_of(int32_t moe_layer_idx, int64_t step_idx) {
  return popularity_->epoch_of(moe_layer_idx, step_idx);
}

int64_t SyntheticRoutingModel::epoch_start_step(int32_t moe_layer_idx, int64_t epoch_idx) {
  return popularity_->epoch_start_step(moe_layer_idx, epoch_idx);
}

SyntheticRoutingModel::LayerState& SyntheticRoutingModel::layer_at(int32_t moe_layer_idx,
                                                                   int64_t step_idx) {
  const int64_t epoch = epoch_of(moe_layer_idx, step_idx);
  LayerState& layer = layers_[moe_layer_idx];
  if (layer.cached_epoch == epoch) return layer;
  layer.epoch = popularity_->epoch(moe_layer_idx, epoch);
  layer.cached_epoch = epoch;
  layer.samplers.clear();
  layer.samplers.resize(layer.epoch->popularity.size());
  layer.gpu.reset();
  layer.gpu_placement_version = 0;
  return layer;
}

TokenSampler& SyntheticRoutingModel::sampler(LayerState& layer, int32_t domain_idx) {
  std::unique_ptr<TokenSampler>& sampler = layer.samplers[domain_idx];
  if (!sampler) {
    const SyntheticPopularity::Layer& shared = *popularity_->layers_[layer.moe_layer_idx];
    sampler = std::make_unique<TokenSampler>(
        shape_, layer.epoch->popularity[domain_idx], shared.cluster_of_expert,
        shared.skew.coactivation.cluster_size, shared.skew.coactivation.prob);
  }
  return *sampler;
}

bool SyntheticRoutingModel::per_token_for(int32_t num_tokens) const {
  switch (spec_.sampling) {
    case SamplingMode::kMargins:
    case SamplingMode::kCounts:
      return false;
    case SamplingMode::kPerToken:
      return true;
    case SamplingMode::kAuto:
      return num_tokens <= spec_.per_token_max_tokens;
  }
  return false;
}

bool SyntheticRoutingModel::margins_for(int32_t num_tokens) const {
  return num_tokens > 0 && !per_token_for(num_tokens) && spec_.sampling != SamplingMode::kCounts;
}

void SyntheticRoutingModel::draw_counts(RngStream& rng, int32_t n, std::span<const double> pi,
                                        std::span<int32_t> row) {
  if (n == 0) return;
  capped_multinomial(rng, n, shape_.top_k, pi, counts_scratch_, capped_scratch_);
  for (size_t e = 0; e < pi.size(); ++e) row[e] += static_cast<int32_t>(counts_scratch_[e]);
}

void SyntheticRoutingModel::draw_multinomial(RngStream& rng, int64_t n,
                                             std::span<const double> shares,
                                             const PreparedMultinomial* prepared) {
  counts_scratch_.resize(shares.size());
  if (prepared != nullptr) {
    prepared->draw(rng, n, counts_scratch_);
  } else {
    multinomial(rng, n, shares, counts_scratch_);
  }
}

void SyntheticRoutingModel::draw_tokens(RngStream& rng, LayerState& layer, int32_t domain_idx,
                                        int32_t n, std::span<const int32_t> gpu_of_expert,
                                        std::span<int32_t> row) {
  if (n == 0) return;
  TokenSampler& s = sampler(layer, domain_idx);
  token_scratch_.resize(shape_.top_k);
  for (int32_t t = 0; t < n; ++t) {
    s.sample(rng, token_scratch_);
    if (gpu_of_expert.empty()) {
      for (int32_t e : token_scratch_) ++row[e];
    } else {
      for (int32_t e : token_scratch_) ++row[gpu_of_expert[e]];
    }
  }
}

void SyntheticRoutingModel::split_domains(RngStream& rng, const RoutingQuery& query,
                                          int32_t src_idx) {
  const int32_t num_domains = spec_.num_domains();
  const int32_t n = query.tokens_per_src[src_idx];
  if (!query.tokens_per_src_domain.empty()) {
    for (int32_t d = 0; d < num_domains; ++d) {
      domain_tokens_[d] =
          query.tokens_per_src_domain[static_cast<size_t>(src_idx) * num_domains + d];
    }
  } else if (num_domains == 1) {
    domain_tokens_[0] = n;
  } else {
    multinomial(rng, n, popularity_->domain_weights_, domain_tokens_);
  }
}

namespace {

void check_query(const RoutingQuery& q, const RoutingShape& shape, int32_t num_domains) {
  MOESIM_CHECK(q.moe_layer_idx >= 0 && q.moe_layer_idx < shape.num_moe_layers, "layer range");
  MOESIM_CHECK(q.step_idx >= 0, "step must be >= 0");
  int32_t least = 0;  // a minimum (vectorised) rather than a check per source
  for (const int32_t n : q.tokens_per_src) least = std::min(least, n);
  MOESIM_CHECK(least >= 0, "token counts must be >= 0");
  MOESIM_CHECK(q.candidate_epsilon >= 0 && q.candidate_epsilon < 1,
               "candidate epsilon must be in [0, 1)");
  if (q.tokens_per_src_domain.empty()) return;
  MOESIM_CHECK(q.tokens_per_src_domain.size() == q.tokens_per_src.size() * num_domains,
               "domain split must be num_src x num_domains");
  for (size_t s = 0; s < q.tokens_per_src.size(); ++s) {
    int64_t sum = 0;
    for (int32_t d = 0; d < num_domains; ++d) {
      const int32_t v = q.tokens_per_src_domain[s * num_domains + d];
      MOESIM_CHECK(v >= 0, "domain token counts must be >= 0");
      sum += v;
    }
    MOESIM_CHECK(sum == q.tokens_per_src[s], "domain split must sum to the source's tokens");
  }
}

}  // namespace

void SyntheticRoutingModel::route(const RoutingQuery& query, CountMatrix& out) {
  const int32_t num_domains = spec_.num_domains();
  check_query(query, shape_, num_domains);
  LayerState& layer = layer_at(query.moe_layer_idx, query.step_idx);
  RngStream rng(draw_seed_, draw_stream_name('r', query.moe_layer_idx, query.step_idx));
  const auto num_src = static_cast<int32_t>(query.tokens_per_src.size());
  const bool split = !query.tokens_per_src_domain.empty();
  out.reset(num_src, shape_.num_experts);
  for (int32_t s = 0; s < num_src; ++s) {
    const int32_t n = query.tokens_per_src[s];
    if (n == 0 || margins_for(n)) continue;
    const bool per_token = per_token_for(n);
    if (!per_token && !split) {
      draw_counts(rng, n, layer.epoch->mix_pi, out.row(s));
      continue;
    }
    split_domains(rng, query, s);
    for (int32_t d = 0; d < num_domains; ++d) {
      const auto nd = static_cast<int32_t>(domain_tokens_[d]);
      if (per_token) {
        draw_tokens(rng, layer, d, nd, {}, out.row(s));
      } else {
        draw_counts(rng, nd, layer.epoch->pi[d], out.row(s));
      }
    }
  }
  if (spec_.sampling != SamplingMode::kMargins && spec_.sampling != SamplingMode::kAuto) return;
  const int32_t num_experts = shape_.num_experts;
  if (split) {
    gpu_shares_scratch_.resize(static_cast<size_t>(num_domains) * num_experts);
    for (int32_t d = 0; d < num_domains; ++d) {
      std::copy(layer.epoch->pi[d].begin(), layer.epoch->pi[d].end(),
                gpu_shares_scratch_.begin() + static_cast<size_t>(d) * num_experts);
    }
    margins_pass(rng, query, num_domains, gpu_shares_scratch_, true, {}, out);
  } else {
    margins_pass(rng, query, 1, layer.epoch->mix_pi, true, {}, out);
  }
}

void SyntheticRoutingModel::route_to_gpus(const RoutingQuery& query,
                                          std::span<const int32_t> gpu_of_expert,
                                          int32_t num_dst_gpus, CountMatrix& out) {
  const int32_t num_domains = spec_.num_domains();
  check_query(query, shape_, num_domains);
  MOESIM_CHECK(gpu_of_expert.size() == static_cast<size_t>(shape_.num_experts),
               "one GPU per expert");
  LayerState& layer = layer_at(query.moe_layer_idx, query.step_idx);
  RngStream rng(draw_seed_, draw_stream_name('g', query.moe_layer_idx, query.step_idx));
  // Destination shares: one row for the domain mix, or one per domain when split.
  const bool split = !query.tokens_per_src_domain.empty();
  const int32_t num_rows = split ? num_domains : 1;
  const std::span<const PreparedMultinomial> prepared = kept_gpu_draws(
      layer,
      fill_gpu_shares(layer, gpu_of_expert, query.placement_version, num_dst_gpus, num_rows));
  const std::vector<double>& gpu_shares = layer.gpu->shares;
  const auto num_src = static_cast<int32_t>(query.tokens_per_src.size());
  out.reset(num_src, num_dst_gpus);
  for (int32_t s = 0; s < num_src; ++s) {
    const int32_t n = query.tokens_per_src[s];
    if (n == 0 || margins_for(n)) continue;
    const std::span<int32_t> row = out.row(s);
    const bool per_token = per_token_for(n);
    if (!per_token && !split) {
      draw_multinomial(rng, static_cast<int64_t>(n) * shape_.top_k,
                       std::span<const double>(gpu_shares.data(), num_dst_gpus),
                       prepared.empty() ? nullptr : &prepared[0]);
      for (int32_t g = 0; g < num_dst_gpus; ++g) row[g] += static_cast<int32_t>(counts_scratch_[g]);
      continue;
    }
    split_domains(rng, query, s);
    for (int32_t d = 0; d < num_domains; ++d) {
      const auto nd = static_cast<int32_t>(domain_tokens_[d]);
      if (nd == 0) continue;
      if (per_token) {
        draw_tokens(rng, layer, d, nd, gpu_of_expert, row);
        continue;
      }
      draw_multinomial(rng, static_cast<int64_t>(nd) * shape_.top_k,
                       std::span<const double>(
                           gpu_shares.data() + static_cast<size_t>(d) * num_dst_gpus, num_dst_gpus),
                       prepared.empty() ? nullptr : &prepared[d]);
      for (int32_t g = 0; g < num_dst_gpus; ++g) row[g] += static_cast<int32_t>(counts_scratch_[g]);
    }
  }
  if (spec_.sampling == SamplingMode::kMargins || spec_.sampling == SamplingMode::kAuto) {
    margins_pass(rng, query, num_rows, gpu_shares, false, prepared, out);
  }
}

bool SyntheticRoutingModel::fill_gpu_shares(LayerState& layer,
                                            std::span<const int32_t> gpu_of_expert,
                                            uint64_t placement_version, int32_t num_dst_gpus,
                                            int32_t num_rows) {
  MOESIM_CHECK(gpu_of_expert.size() == static_cast<size_t>(shape_.num_experts),
               "one GPU per expert");
  // Unchanged placement (the same known version, or equal entries) and shares since the layer's
  // last call: the same sums, kept.
  const SyntheticPopularity::GpuShares* last = layer.gpu.get();
  if (last && last->rows == num_rows &&
      last->shares.size() == static_cast<size_t>(num_rows) * num_dst_gpus &&
      ((placement_version != 0 && placement_version == layer.gpu_placement_version) ||
       std::equal(gpu_of_expert.begin(), gpu_of_expert.end(), last->placement.begin(),
                  last->placement.end()))) {
    layer.gpu_placement_version = placement_version;
    return true;
  }
  // Another model's (a replica with the same map in the same epoch), or new.
  layer.gpu = popularity_->gpu_shares(*layer.epoch, gpu_of_expert, num_dst_gpus, num_rows);
  layer.gpu_placement_version = placement_version;
  return layer.gpu.use_count() > 1;  // held by another model too: a reuse
}

std::span<const PreparedMultinomial> SyntheticRoutingModel::kept_gpu_draws(LayerState& layer,
                                                                           bool kept) {
  if (!kept) return {};
  SyntheticPopularity::GpuShares& gpu = *layer.gpu;
  if (gpu.draws.empty()) {
    const auto num_dst_gpus = gpu.shares.size() / static_cast<size_t>(gpu.rows);
    for (int32_t r = 0; r < gpu.rows; ++r) {
      gpu.draws.emplace_back(std::span<const double>(gpu.shares)
                                 .subspan(static_cast<size_t>(r) * num_dst_gpus, num_dst_gpus));
    }
  }
  return gpu.draws;
}

bool SyntheticRoutingModel::route_totals_to_gpus(const RoutingQuery& query,
                                                 std::span<const int32_t> gpu_of_expert,
                                                 int32_t num_dst_gpus,
                                                 std::vector<int64_t>& totals) {
  const int32_t num_domains = spec_.num_domains();
  check_query(query, shape_, num_domains);
  LayerState& layer = layer_at(query.moe_layer_idx, query.step_idx);
  // The stream route_to_gpus() draws from: under kMargins its first draws are these.
  RngStream rng(draw_seed_, draw_stream_name('g', query.moe_layer_idx, query.step_idx));
  const int32_t num_rows = query.tokens_per_src_domain.empty() ? 1 : num_domains;
  const bool kept =
      fill_gpu_shares(layer, gpu_of_expert, query.placement_version, num_dst_gpus, num_rows);
  if (num_rows == 1 && query.candidate_epsilon > 0) {
    // One multinomial (draw_totals' first draws): its candidates only, where some destination
    // can be bounded away; else every destination, as below.
    int64_t num_tokens = 0;
    for (const int32_t n : query.tokens_per_src) num_tokens += n;
    const int64_t n = num_tokens * shape_.top_k;
    std::optional<CandidateMultinomial>& candidates = layer.gpu->candidates;
    if (!candidates) candidates.emplace(layer.gpu->shares);
    const size_t k =
        n > 0 ? candidates->num_candidates(n, query.candidate_epsilon) : candidates->size();
    if (k < candidates->size()) {
      totals.resize(num_dst_gpus);  // draw() writes every destination
      candidates->draw(rng, n, k, totals);
      return true;
    }
  }
  draw_totals(rng, query, num_rows, layer.gpu->shares, false, kept_gpu_draws(layer, kept), totals);
  return true;
}

bool SyntheticRoutingModel::route_expert_totals(const RoutingQuery& query,
                                                std::vector<int64_t>& totals) {
  const int32_t num_domains = spec_.num_domains();
  check_query(query, shape_, num_domains);
  LayerState& layer = layer_at(query.moe_layer_idx, query.step_idx);
  // The stream route() draws from: under kMargins its first draws are these.
  RngStream rng(draw_seed_, draw_stream_name('r', query.moe_layer_idx, query.step_idx));
  const int32_t num_experts = shape_.num_experts;
  if (query.tokens_per_src_domain.empty()) {
    draw_totals(rng, query, 1, layer.epoch->mix_pi, true, {}, totals);
    return true;
  }
  gpu_shares_scratch_.resize(static_cast<size_t>(num_domains) * num_experts);
  for (int32_t d = 0; d < num_domains; ++d) {
    std::copy(layer.epoch->pi[d].begin(), layer.epoch->pi[d].end(),
              gpu_shares_scratch_.begin() + static_cast<size_t>(d) * num_experts);
  }
  draw_totals(rng, query, num_domains, gpu_shares_scratch_, true, {}, totals);
  return true;
}

void SyntheticRoutingModel::sample_token_experts(int64_t step_idx, int32_t moe_layer_idx,
                                                 int32_t domain_idx, int32_t num_tokens,
                                                 std::vector<int32_t>& experts_out) {
  MOESIM_CHECK(domain_idx >= 0 && domain_idx < spec_.num_domains(), "domain range");
  MOESIM_CHECK(num_tokens >= 0, "token count must be >= 0");
  LayerState& layer = layer_at(moe_layer_idx, step_idx);
  RngStream rng(draw_seed_, draw_stream_name('t', moe_layer_idx, step_idx));
  TokenSampler& s = sampler(layer, domain_idx);
  experts_out.resize(static_cast<size_t>(num_tokens) * shape_.top_k);
  for (int32_t t = 0; t < num_tokens; ++t) {
    s.sample(rng, std::span<int32_t>(experts_out.data() + static_cast<size_t>(t) * shape_.top_k,
                                     shape_.top_k));
  }
}

uint64_t SyntheticRoutingModel::expected_shares_version(int32_t moe_layer_idx, int64_t step_idx) {
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < shape_.num_moe_layers, "layer range");
  return layer_at(moe_layer_idx, step_idx).epoch->version;
}

std::span<const double> SyntheticRoutingModel::popularity(int32_t moe_layer_idx, int64_t step_idx,
                                                          int32_t domain_idx) {
  MOESIM_CHECK(domain_idx >= 0 && domain_idx < spec_.num_domains(), "domain range");
  return layer_at(moe_layer_idx, step_idx).epoch->popularity[domain_idx];
}

std::span<const double> SyntheticRoutingModel::selection_shares(int32_t moe_layer_idx,
                                                                int64_t step_idx,
                                                                int32_t domain_idx) {
  MOESIM_CHECK(domain_idx >= 0 && domain_idx < spec_.num_domains(), "domain range");
  return layer_at(moe_layer_idx, step_idx).epoch->pi[domain_idx];
}

std::span<const int32_t> SyntheticRoutingModel::clusters(int32_t moe_layer_idx) const {
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < shape_.num_moe_layers, "layer range");
  return popularity_->layers_[moe_layer_idx]->cluster_of_expert;
}

}  // namespace moesim::sim
