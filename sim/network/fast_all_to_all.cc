#include "sim/network/fast_all_to_all.h"

#include <algorithm>
#include <map>
#include <utility>

#include "base/check.h"
#include "sim/network/fat_tree_routes.h"

namespace moesim::sim {
namespace {

// Dense index of `key` in `index`, adding it when new.
template <typename Key>
int32_t dense(std::map<Key, int32_t>& index, Key key) {
  auto [it, added] = index.try_emplace(key, static_cast<int32_t>(index.size()));
  return it->second;
}

}  // namespace

FastAllToAll::FastAllToAll(const Topology& topology, std::vector<GpuId> participants,
                           DispatchAlgorithm algorithm)
    : topology_(topology), participants_(std::move(participants)), algorithm_(algorithm) {
  for (size_t i = 1; i < participants_.size(); ++i) {
    if (participants_[i].value <= participants_[i - 1].value) {
      why_not_ = "the participants are not increasing GPU ids";
      return;
    }
  }
  check_routes();
  if (!valid()) return;
  group_participants();
  auto gather = [&](const std::vector<int32_t>& link, std::vector<double>& inv) {
    inv.resize(link.size());
    for (size_t i = 0; i < link.size(); ++i) inv[i] = link[i] >= 0 ? inv_cap(link[i]) : 0.0;
  };
  gather(nvlink_up_, nv_up_inv_);
  gather(nvlink_down_, nv_down_inv_);
  gather(nic_up_, nic_up_inv_);
  gather(nic_down_, nic_down_inv_);
  auto all_equal = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
  };
  uniform_links_ = !participants_.empty() && all_equal(nv_up_inv_) && all_equal(nv_down_inv_) &&
                   all_equal(nic_up_inv_) && all_equal(nic_down_inv_);
}

void FastAllToAll::check_routes() {
  FatTreeRoutes routes = check_fat_tree_routes(topology_, participants_);
  if (!routes.why_not.empty()) {
    why_not_ = std::move(routes.why_not);
    return;
  }
  const auto p = static_cast<int32_t>(participants_.size());
  nvlink_up_ = std::move(routes.nvlink_up);
  nvlink_down_ = std::move(routes.nvlink_down);
  nic_up_ = std::move(routes.nic_up);
  nic_down_ = std::move(routes.nic_down);
  nvlink_latency_s_ = routes.nvlink_latency_s;
  leaf_latency_s_ = routes.leaf_latency_s;
  spine_latency_s_ = routes.spine_latency_s;
  if (algorithm_ == DispatchAlgorithm::kHierarchical) {
    const int32_t gpn = topology_.gpus_per_node();
    bool whole = p > 0 && p % gpn == 0 && participants_[0].value % gpn == 0 &&
                 participants_.back().value == participants_[0].value + p - 1;
    if (!whole) {
      why_not_ = "hierarchical dispatch over participants that are not whole consecutive nodes";
      return;
    }
    for (int32_t i = 0; i + 1 < p; ++i) {
      const bool same_node =
          topology_.node_of(participants_[i]) == topology_.node_of(participants_[i + 1]);
      if (same_node != topology_.same_nvlink_domain(participants_[i], participants_[i + 1])) {
        why_not_ = "hierarchical dispatch where an NVLink domain spans several nodes";
        return;
      }
    }
  }
}

void FastAllToAll::group_participants() {
  const auto p = static_cast<int32_t>(participants_.size());
  const auto& links = topology_.links();
  std::map<int32_t, int32_t> doms, leaves, rails;
  std::map<std::pair<int32_t, int32_t>, int32_t> leaf_doms, leaf_rails;
  dom_.resize(p);
  leaf_.resize(p);
  leaf_dom_.resize(p);
  rail_.resize(p);
  leaf_rail_.resize(p);
  for (int32_t i = 0; i < p; ++i) {
    const GpuId g = participants_[i];
    const int32_t leaf_vertex = topology_.leaf_vertex_of(g);
    dom_[i] = dense(doms, topology_.nvlink_domain_of(g));
    leaf_[i] = dense(leaves, leaf_vertex);
    leaf_dom_[i] = dense(leaf_doms, std::pair{leaf_vertex, topology_.nvlink_domain_of(g)});
    rail_[i] = dense(rails, topology_.rail_of(g));
    leaf_rail_[i] = dense(leaf_rails, std::pair{leaf_vertex, topology_.rail_of(g)});
  }
  num_doms_ = static_cast<int32_t>(doms.size());
  num_leaves_ = static_cast<int32_t>(leaves.size());
  num_leaf_doms_ = static_cast<int32_t>(leaf_doms.size());
  num_rails_ = static_cast<int32_t>(rails.size());
  num_leaf_rails_ = static_cast<int32_t>(leaf_rails.size());
  // Spine links of each participating leaf: their count and the slowest one's inverse capacity
  // (an even spread drains last on it).
  leaf_up_inv_cap_.assign(num_leaves_, 0.0);
  leaf_down_inv_cap_.assign(num_leaves_, 0.0);
  leaf_up_links_.assign(num_leaves_, 0);
  leaf_down_links_.assign(num_leaves_, 0);
  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].link_class != LinkClass::kLeafSpine) continue;
    if (auto it = leaves.find(links[l].from_vertex); it != leaves.end()) {
      leaf_up_inv_cap_[it->second] = std::max(leaf_up_inv_cap_[it->second], inv_cap(l));
      leaf_up_links_[it->second]++;
    }
    if (auto it = leaves.find(links[l].to_vertex); it != leaves.end()) {
      leaf_down_inv_cap_[it->second] = std::max(leaf_down_inv_cap_[it->second], inv_cap(l));
      leaf_down_links_[it->second]++;
    }
  }
  for (auto* v : {&nv_out_, &nv_in_, &net_out_, &net_in_, &spine_out_, &spine_in_}) v->resize(p);
  std::vector<std::vector<int32_t>> group_doms(num_leaf_rails_);
  for (int32_t i = 0; i < p; ++i) group_doms[leaf_rail_[i]].push_back(dom_[i]);
  std::map<std::vector<int32_t>, int32_t> distinct;
  std::vector<int32_t> distinct_of_group(num_leaf_rails_);
  distinct_begin_.assign(1, 0);
  for (int32_t lr = 0; lr < num_leaf_rails_; ++lr) {
    auto [it, added] = distinct.try_emplace(group_doms[lr], static_cast<int32_t>(distinct.size()));
    distinct_of_group[lr] = it->second;
    if (!added) continue;
    distinct_doms_.insert(distinct_doms_.end(), group_doms[lr].begin(), group_doms[lr].end());
    distinct_begin_.push_back(static_cast<int32_t>(distinct_doms_.size()));
  }
  distinct_sums_.resize(distinct.size());
  distinct_of_.resize(p);
  for (int32_t i = 0; i < p; ++i) distinct_of_[i] = distinct_of_group[leaf_rail_[i]];
}

void FastAllToAll::load(std::span<const double> tokens, std::span<const double> reach) {
  load(tokens, reach, reach);
}

void FastAllToAll::load(std::span<const double> tokens, std::span<const double> local_reach,
                        std::span<const double> remote_reach) {
  MOESIM_CHECK(valid(), "FastAllToAll::load on participants it does not apply to");
  const size_t np = participants_.size();
  MOESIM_CHECK(tokens.size() == np && local_reach.size() == np && remote_reach.size() == np,
               "one token count and one reach of each kind per participant");
  leaf_up_tokens_.assign(num_leaves_, 0.0);
  leaf_down_tokens_.assign(num_leaves_, 0.0);
  if (algorithm_ != DispatchAlgorithm::kHierarchical) {  // low-latency: reach = rows per token
    load_direct(tokens, local_reach, remote_reach);
  } else {
    load_hierarchical(tokens, local_reach, remote_reach);
  }
}

inline void FastAllToAll::finish_participant(int32_t i, double nv_out, double nv_in, double net_out,
                                             double net_in, double spine_out, double spine_in,
                                             LoadSums& sums) {
  // A difference of sums may leave a rounding residue where no flow crosses a spine.
  if (spine_out <= 1e-9 * net_out) spine_out = 0;
  if (spine_in <= 1e-9 * net_in) spine_in = 0;
  nv_out_[i] = nv_out;
  nv_in_[i] = nv_in;
  net_out_[i] = net_out;
  net_in_[i] = net_in;
  spine_out_[i] = spine_out;
  spine_in_[i] = spine_in;
  leaf_up_tokens_[leaf_[i]] += spine_out;
  leaf_down_tokens_[leaf_[i]] += spine_in;
  sums.total += nv_out + net_out;
  MaxLoads& m = sums.max;
  m.nv_out = std::max(m.nv_out, nv_out);
  m.nv_in = std::max(m.nv_in, nv_in);
  // Each NIC load into its latency class's maximum, without a branch: the other class takes 0,
  // which leaves its maximum (>= 0) as it is.
  const bool out_spine = spine_out > 0, in_spine = spine_in > 0;
  m.net_out_spine = std::max(m.net_out_spine, out_spine ? net_out : 0.0);
  m.net_out_leaf = std::max(m.net_out_leaf, out_spine ? 0.0 : net_out);
  m.net_in_spine = std::max(m.net_in_spine, in_spine ? net_in : 0.0);
  m.net_in_leaf = std::max(m.net_in_leaf, in_spine ? 0.0 : net_in);
}

void FastAllToAll::load_direct(std::span<const double> tokens, std::span<const double> local,
                               std::span<const double> remote) {
  const auto p = static_cast<int32_t>(participants_.size());
  dom_local_.assign(num_doms_, 0.0);
  dom_reach_.assign(num_doms_, 0.0);
  dom_tokens_.assign(num_doms_, 0.0);
  leaf_reach_.assign(num_leaves_, 0.0);
  leaf_tokens_.assign(num_leaves_, 0.0);
  leaf_dom_reach_.assign(num_leaf_doms_, 0.0);
  leaf_dom_tokens_.assign(num_leaf_doms_, 0.0);
  double all_reach = 0, all_tokens = 0;
  for (int32_t i = 0; i < p; ++i) {
    dom_local_[dom_[i]] += local[i];
    dom_reach_[dom_[i]] += remote[i];
    dom_tokens_[dom_[i]] += tokens[i];
    leaf_reach_[leaf_[i]] += remote[i];
    leaf_tokens_[leaf_[i]] += tokens[i];
    leaf_dom_reach_[leaf_dom_[i]] += remote[i];
    leaf_dom_tokens_[leaf_dom_[i]] += tokens[i];
    all_reach += remote[i];
    all_tokens += tokens[i];
  }
  LoadSums sums;
  for (int32_t i = 0; i < p; ++i) {
    const double t = tokens[i], rl = local[i], rr = remote[i];
    const int32_t dom = dom_[i];
    finish_participant(i, t * std::max(0.0, dom_local_[dom] - rl),
                       rl * std::max(0.0, dom_tokens_[dom] - t),
                       t * std::max(0.0, all_reach - dom_reach_[dom]),
                       rr * std::max(0.0, all_tokens - dom_tokens_[dom]),
                       t * std::max(0.0, all_reach - dom_reach_[dom] - leaf_reach_[leaf_[i]] +
                                             leaf_dom_reach_[leaf_dom_[i]]),
                       rr * std::max(0.0, all_tokens - dom_tokens_[dom] - leaf_tokens_[leaf_[i]] +
                                              leaf_dom_tokens_[leaf_dom_[i]]),
                       sums);
  }
  total_tokens_ = sums.total;
  max_loads_ = sums.max;
}

void FastAllToAll::cache_token_sums(std::span<const double> tokens) {
  // Nodes are the NVLink domains (checked): dom_ indexes them. Each sum is accumulated in
  // participant order, as the reach sums are: the same figures as summing both in one pass.
  const auto p = static_cast<int32_t>(participants_.size());
  if (cached_tokens_.size() == tokens.size() &&
      std::equal(tokens.begin(), tokens.end(), cached_tokens_.begin())) {
    return;
  }
  cached_tokens_.assign(tokens.begin(), tokens.end());
  dom_tokens_.assign(num_doms_, 0.0);
  rail_tokens_.assign(num_rails_, 0.0);
  leaf_rail_tokens_.assign(num_leaf_rails_, 0.0);
  all_tokens_ = 0;
  for (int32_t i = 0; i < p; ++i) {
    dom_tokens_[dom_[i]] += tokens[i];
    rail_tokens_[rail_[i]] += tokens[i];
    leaf_rail_tokens_[leaf_rail_[i]] += tokens[i];
    all_tokens_ += tokens[i];
  }
  rail_rest_.resize(p);
  node_rest_.resize(p);
  other_rails_rest_.resize(p);
  rail_off_leaf_.resize(p);
  for (int32_t i = 0; i < p; ++i) {
    const double t = tokens[i], rail = rail_tokens_[rail_[i]], node_tokens = dom_tokens_[dom_[i]];
    rail_rest_[i] = std::max(0.0, rail - t);
    node_rest_[i] = std::max(0.0, node_tokens - t);
    other_rails_rest_[i] = std::max(0.0, (all_tokens_ - rail) - (node_tokens - t));
    rail_off_leaf_[i] = std::max(0.0, rail - leaf_rail_tokens_[leaf_rail_[i]]);
  }
}

void FastAllToAll::load_hierarchical(std::span<const double> tokens, std::span<const double> local,
                                     std::span<const double> remote) {
  // Nodes are the NVLink domains (checked): dom_ indexes them.
  const auto p = static_cast<int32_t>(participants_.size());
  cache_token_sums(tokens);
  dom_local_.assign(num_doms_, 0.0);
  dom_reach_.assign(num_doms_, 0.0);
  node_reach_.assign(num_doms_, 1.0);  // prod of (1 - remote reach), then g = 1 - prod
  // Per node, its participants in order (nodes are whole runs of consecutive participants,
  // checked): the same sums and product as accumulating per participant, kept in registers.
  // One reach for both (load(tokens, reach)): the two sums are one.
  const bool one_reach = local.data() == remote.data();
  for (int32_t i = 0; i < p;) {
    const int32_t dom = dom_[i];
    double sum_local = 0, sum_reach = 0, miss = 1.0;
    if (one_reach) {
      for (; i < p && dom_[i] == dom; ++i) {
        sum_reach += remote[i];
        miss *= 1.0 - remote[i];
      }
      sum_local = sum_reach;
    } else {
      for (; i < p && dom_[i] == dom; ++i) {
        sum_local += local[i];
        sum_reach += remote[i];
        miss *= 1.0 - remote[i];
      }
    }
    dom_local_[dom] = sum_local;
    dom_reach_[dom] = sum_reach;
    node_reach_[dom] = miss;
  }
  double all_node_reach = 0;
  if (node_limit_.empty()) {
    for (double& g : node_reach_) {
      g = 1.0 - g;
      all_node_reach += g;
    }
  } else {
    // Product form: tokens(s, d) / T_s = reach_d, so the estimate is per destination node.
    node_max_reach_.assign(num_doms_, 0.0);
    node_sum_reach_.assign(num_doms_, 0.0);
    std::fill(node_reach_.begin(), node_reach_.end(), 1.0);  // extras_miss per node
    for (int32_t i = 0; i < p; ++i) {
      const int32_t node = topology_.node_of(participants_[i]).value;
      const double r = remote[i];
      if (r <= 0) continue;
      node_reach_[dom_[i]] *=
          extras_miss_factor(r, 1.0, node_limit_.open_fraction[node], node_limit_.extra_share);
      node_max_reach_[dom_[i]] = std::max(node_max_reach_[dom_[i]], r);
      node_sum_reach_[dom_[i]] += r;
    }
    for (int32_t i = 0; i < p; ++i) {
      // Once per node: at its first participant (nodes are consecutive).
      if (i > 0 && dom_[i] == dom_[i - 1]) continue;
      const int32_t node = topology_.node_of(participants_[i]).value;
      double& g = node_reach_[dom_[i]];
      g = node_sum_reach_[dom_[i]] > 0
              ? limited_unique_tokens(1.0, node_limit_.open_fraction[node],
                                      node_limit_.guaranteed_share[node], g,
                                      node_max_reach_[dom_[i]], node_sum_reach_[dom_[i]])
              : 0.0;
      all_node_reach += g;
    }
  }
  // Each (leaf, rail) group's node reaches summed in participant order: once per distinct
  // sequence of nodes (the same additions from 0 as a pass over the participants).
  for (size_t c = 0; c + 1 < distinct_begin_.size(); ++c) {
    double sum = 0;
    for (int32_t k = distinct_begin_[c]; k < distinct_begin_[c + 1]; ++k) {
      sum += node_reach_[distinct_doms_[k]];
    }
    distinct_sums_[c] = sum;
  }
  LoadSums sums;
  for (int32_t i = 0; i < p; ++i) {
    const int32_t dom = dom_[i];
    const double t = tokens[i], rl = local[i], rr = remote[i], g = node_reach_[dom];
    const double rail_rest = rail_rest_[i];
    finish_participant(
        i,
        // Own tokens to the node's other GPUs, and those relayed for the same rail's other nodes.
        t * std::max(0.0, dom_local_[dom] - rl) + std::max(0.0, dom_reach_[dom] - rr) * rail_rest,
        // From the node's other GPUs' own tokens, and relayed by them for their rails.
        rl * node_rest_[i] + rr * other_rails_rest_[i], t * std::max(0.0, all_node_reach - g),
        g * rail_rest, t * std::max(0.0, all_node_reach - distinct_sums_[distinct_of_[i]]),
        g * rail_off_leaf_[i], sums);
  }
  total_tokens_ = sums.total;
  max_loads_ = sums.max;
}

double FastAllToAll::seconds(double bytes_per_token, bool transposed) const {
  const Seconds s =
      transposed ? both_seconds(0, bytes_per_token) : both_seconds(bytes_per_token, 0);
  return transposed ? s.combine : s.dispatch;
}

FastAllToAll::Seconds FastAllToAll::both_seconds(double dispatch_bytes_per_token,
                                                 double combine_bytes_per_token) const {
  // Combine is dispatch transposed: each link's outbound load is dispatch's inbound one.
  const auto p = static_cast<int32_t>(participants_.size());
  const double bd = dispatch_bytes_per_token, bc = combine_bytes_per_token;
  const double spine_lat = std::max(spine_latency_s_, leaf_latency_s_);
  // A link without load adds nothing (0 <= every term). Each maximum has its own accumulator so
  // that they do not wait on each other; max is exact, so the result does not depend on that.
  double d0 = 0, d1 = 0, d2 = 0, d3 = 0, c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  const bool slowed_out = !nic_out_slowdown_.empty(), slowed_in = !nic_in_slowdown_.empty();
  if (uniform_links_ && !slowed_out && !slowed_in) {
    // Every participant's links alike: each term below is a non-decreasing function of its load
    // (products by and sums of non-negative constants round monotonically), so each maximum is
    // the term of the largest load of its kind and latency class, bit for bit (load() keeps
    // them). A slowdown factor of 1 multiplies exactly.
    const MaxLoads& m = max_loads_;
    const double nv_up = nv_up_inv_[0], nv_down = nv_down_inv_[0];
    const double nic_up = nic_up_inv_[0], nic_down = nic_down_inv_[0];
    auto term = [](double load, double bytes, double inv_cap, double latency) {
      return load > 0 ? load * bytes * inv_cap + latency : 0.0;
    };
    d0 = term(m.nv_out, bd, nv_up, nvlink_latency_s_);
    c0 = term(m.nv_out, bc, nv_down, nvlink_latency_s_);
    d1 = term(m.nv_in, bd, nv_down, nvlink_latency_s_);
    c1 = term(m.nv_in, bc, nv_up, nvlink_latency_s_);
    d2 = std::max(term(m.net_out_spine, bd, nic_up, spine_lat),
                  term(m.net_out_leaf, bd, nic_up, leaf_latency_s_));
    c2 = std::max(term(m.net_out_spine, bc, nic_down, spine_lat),
                  term(m.net_out_leaf, bc, nic_down, leaf_latency_s_));
    d3 = std::max(term(m.net_in_spine, bd, nic_down, spine_lat),
                  term(m.net_in_leaf, bd, nic_down, leaf_latency_s_));
    c3 = std::max(term(m.net_in_spine, bc, nic_up, spine_lat),
                  term(m.net_in_leaf, bc, nic_up, leaf_latency_s_));
  }
  const bool per_participant = !uniform_links_ || slowed_out || slowed_in;
  for (int32_t i = 0; per_participant && i < p; ++i) {
    const double nv_out = nv_out_[i], nv_in = nv_in_[i], net_out = net_out_[i], net_in = net_in_[i];
    const double out_lat = spine_out_[i] > 0 ? spine_lat : leaf_latency_s_;
    const double in_lat = spine_in_[i] > 0 ? spine_lat : leaf_latency_s_;
    const double nv_up = nv_up_inv_[i], nv_down = nv_down_inv_[i];
    const double nic_up = nic_up_inv_[i], nic_down = nic_down_inv_[i];
    const double slow_out = slowed_out ? nic_out_slowdown_[i] : 1.0;
    const double slow_in = slowed_in ? nic_in_slowdown_[i] : 1.0;
    d0 = std::max(d0, nv_out > 0 ? nv_out * bd * nv_up + nvlink_latency_s_ : 0.0);
    c0 = std::max(c0, nv_out > 0 ? nv_out * bc * nv_down + nvlink_latency_s_ : 0.0);
    d1 = std::max(d1, nv_in > 0 ? nv_in * bd * nv_down + nvlink_latency_s_ : 0.0);
    c1 = std::max(c1, nv_in > 0 ? nv_in * bc * nv_up + nvlink_latency_s_ : 0.0);
    d2 = std::max(d2, net_out > 0 ? net_out * bd * nic_up * slow_out + out_lat : 0.0);
    c2 = std::max(c2, net_out > 0 ? net_out * bc * nic_down * slow_in + out_lat : 0.0);
    d3 = std::max(d3, net_in > 0 ? net_in * bd * nic_down * slow_in + in_lat : 0.0);
    c3 = std::max(c3, net_in > 0 ? net_in * bc * nic_up * slow_out + in_lat : 0.0);
  }
  double d = std::max(std::max(d0, d1), std::max(d2, d3));
  double c = std::max(std::max(c0, c1), std::max(c2, c3));
  for (int32_t leaf = 0; leaf < num_leaves_; ++leaf) {
    const double up = leaf_up_tokens_[leaf], down = leaf_down_tokens_[leaf];
    if (up > 0) {
      MOESIM_CHECK(leaf_up_links_[leaf] > 0 && leaf_down_links_[leaf] > 0,
                   "traffic through a spine from a leaf without spines");
      d = std::max(d, up * bd / leaf_up_links_[leaf] * leaf_up_inv_cap_[leaf] + spine_lat);
      c = std::max(c, up * bc / leaf_down_links_[leaf] * leaf_down_inv_cap_[leaf] + spine_lat);
    }
    if (down > 0) {
      MOESIM_CHECK(leaf_down_links_[leaf] > 0 && leaf_up_links_[leaf] > 0,
                   "traffic through a spine into a leaf without spines");
      d = std::max(d, down * bd / leaf_down_links_[leaf] * leaf_down_inv_cap_[leaf] + spine_lat);
      c = std::max(c, down * bc / leaf_up_links_[leaf] * leaf_up_inv_cap_[leaf] + spine_lat);
    }
  }
  return Seconds{d, c};
}

void FastAllToAll::set_nic_slowdown(std::span<const double> in, std::span<const double> out) {
  MOESIM_CHECK((in.empty() || in.size() == participants_.size()) &&
                   (out.empty() || out.size() == participants_.size()),
               "a NIC slowdown per participant");
  nic_in_slowdown_.assign(in.begin(), in.end());
  nic_out_slowdown_.assign(out.begin(), out.end());
}

void FastAllToAll::add_nic_bytes(double bytes_per_token, bool combine, std::span<double> in,
                                 std::span<double> out) const {
  for (size_t i = 0; i < participants_.size(); ++i) {
    in[i] += (combine ? net_out_[i] : net_in_[i]) * bytes_per_token;
    out[i] += (combine ? net_in_[i] : net_out_[i]) * bytes_per_token;
  }
}

double FastAllToAll::dispatch_seconds(double bytes_per_token) const {
  return seconds(bytes_per_token, false);
}

double FastAllToAll::combine_seconds(double bytes_per_token) const {
  return seconds(bytes_per_token, true);
}

}  // namespace moesim::sim
