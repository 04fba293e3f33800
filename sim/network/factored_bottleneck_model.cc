#include "sim/network/factored_bottleneck_model.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "sim/network/bottleneck_model.h"
#include "sim/network/fat_tree_routes.h"

namespace moesim::sim {

FactoredBottleneckModel::FactoredBottleneckModel(const Topology& topology) : topology_(topology) {
  const auto& links = topology.links();
  inv_capacity_s_per_byte_.resize(links.size());
  for (size_t l = 0; l < links.size(); ++l) {
    inv_capacity_s_per_byte_[l] = 1.0 / links[l].capacity_bytes_per_s;
  }
  factored_ = build_tables();
}

FactoredBottleneckModel::~FactoredBottleneckModel() = default;

bool FactoredBottleneckModel::build_tables() {
  const int32_t g = topology_.num_gpus();
  const auto& links = topology_.links();
  // Leaves: dense indices in vertex order; their uplinks and downlinks.
  std::vector<int32_t> leaf_of_vertex(topology_.num_vertices(), -1);
  int32_t num_leaves = 0;
  for (int32_t v = 0; v < topology_.num_vertices(); ++v) {
    if (topology_.vertex_kind(v) == VertexKind::kLeaf) leaf_of_vertex[v] = num_leaves++;
  }
  uplinks_.assign(num_leaves, {});
  downlinks_.assign(num_leaves, {});
  for (size_t l = 0; l < links.size(); ++l) {
    if (links[l].link_class != LinkClass::kLeafSpine) continue;
    const int32_t from_leaf = leaf_of_vertex[links[l].from_vertex];
    const int32_t to_leaf = leaf_of_vertex[links[l].to_vertex];
    if (from_leaf >= 0) uplinks_[from_leaf].push_back(static_cast<int32_t>(l));
    if (to_leaf >= 0) downlinks_[to_leaf].push_back(static_cast<int32_t>(l));
  }
  leaf_idx_.assign(g, -1);
  for (int32_t i = 0; i < g; ++i) {
    const int32_t v = topology_.leaf_vertex_of(GpuId(i));
    leaf_idx_[i] = v >= 0 ? leaf_of_vertex[v] : -1;
  }
  std::vector<GpuId> all(g);
  for (int32_t i = 0; i < g; ++i) all[i] = GpuId(i);
  FatTreeRoutes routes = check_fat_tree_routes(topology_, all);
  if (!routes.why_not.empty()) return false;
  nvlink_up_ = std::move(routes.nvlink_up);
  nvlink_down_ = std::move(routes.nvlink_down);
  nic_up_ = std::move(routes.nic_up);
  nic_down_ = std::move(routes.nic_down);
  nvlink_latency_s_ = routes.nvlink_latency_s;
  leaf_latency_s_ = routes.leaf_latency_s;
  spine_latency_s_ = routes.spine_latency_s;
  leaf_up_bytes_.resize(num_leaves);
  leaf_down_bytes_.resize(num_leaves);
  leaf_up_time_s_.resize(num_leaves);
  leaf_down_time_s_.resize(num_leaves);
  return true;
}

bool FactoredBottleneckModel::set_participants(const std::vector<GpuId>& gpus) {
  if (gpus == participants_ && !gpus.empty()) return true;
  for (size_t i = 1; i < gpus.size(); ++i) {
    if (gpus[i].value <= gpus[i - 1].value) return false;
  }
  participants_ = gpus;
  const auto p = static_cast<int32_t>(gpus.size());
  // Domains are runs of consecutive GPUs, so increasing participants keep each contiguous.
  domain_begin_.resize(p);
  domain_end_.resize(p);
  domain_flag_begin_.resize(p + 1);
  for (int32_t i = 0; i < p;) {
    const int32_t domain = topology_.nvlink_domain_of(gpus[i]);
    int32_t end = i;
    while (end < p && topology_.nvlink_domain_of(gpus[end]) == domain) ++end;
    for (int32_t k = i; k < end; ++k) {
      domain_begin_[k] = i;
      domain_end_[k] = end;
    }
    i = end;
  }
  domain_flag_begin_[0] = 0;
  for (int32_t i = 0; i < p; ++i) {
    domain_flag_begin_[i + 1] = domain_flag_begin_[i] + (domain_end_[i] - domain_begin_[i]);
  }
  // Same leaf, other domain, in increasing participant order.
  std::vector<std::vector<int32_t>> by_leaf(uplinks_.size());
  for (int32_t i = 0; i < p; ++i) {
    const int32_t leaf = leaf_idx_[gpus[i].value];
    if (leaf >= 0) by_leaf[leaf].push_back(i);
  }
  leaf_peers_.clear();
  leaf_begin_.resize(p + 1);
  for (int32_t i = 0; i < p; ++i) {
    leaf_begin_[i] = static_cast<int64_t>(leaf_peers_.size());
    const int32_t leaf = leaf_idx_[gpus[i].value];
    if (leaf < 0) continue;
    for (int32_t j : by_leaf[leaf]) {
      if (j < domain_begin_[i] || j >= domain_end_[i]) leaf_peers_.push_back(j);
    }
  }
  leaf_begin_[p] = static_cast<int64_t>(leaf_peers_.size());
  domain_flow_.resize(domain_flag_begin_[p]);
  leaf_flow_.resize(leaf_peers_.size());
  return true;
}

void FactoredBottleneckModel::run(const TrafficMatrix& traffic, CollectiveResult& result) {
  if (!factored_ || !set_participants(traffic.gpus())) {
    if (!exact_) exact_ = std::make_unique<BottleneckModel>(topology_);
    link_bytes_.clear();
    exact_->run(traffic, result);
    return;
  }
  const int32_t p = traffic.size();
  sum_traffic(traffic);
  load_links();
  const double duration_s = finish_times();
  result.num_flows = static_cast<int32_t>(num_flows_);
  // Every GPU's send and receive times are at most duration_s: one check covers them.
  result.duration_ns = collective_duration_ns(duration_s, topology_, link_bytes_);
  result.send_done_ns.resize(p);
  result.recv_done_ns.resize(p);
  for (int32_t i = 0; i < p; ++i) {
    result.send_done_ns[i] = from_seconds(send_done_s_[i]);
    result.recv_done_ns[i] = from_seconds(recv_done_s_[i]);
  }
  set_barrier_waits(result);
  set_bottleneck(topology_, link_bytes_, result);
}

void FactoredBottleneckModel::sum_traffic(const TrafficMatrix& traffic) {
  const int32_t p = traffic.size();
  const size_t pp = static_cast<size_t>(p);
  for (auto* v : {&nvlink_out_, &network_out_, &leaf_out_, &nvlink_in_, &network_in_, &leaf_in_}) {
    v->assign(pp, 0.0);
  }
  for (auto* v : {&network_out_flows_, &leaf_out_flows_, &network_in_flows_, &leaf_in_flows_}) {
    v->assign(pp, 0);
  }
  double* col_bytes = network_in_.data();
  int32_t* col_flows = network_in_flows_.data();
  int64_t flows = 0;
  for (int32_t i = 0; i < p; ++i) {
    const double* row = traffic.row(i).data();
    const int32_t lo = domain_begin_[i];
    const int32_t hi = domain_end_[i];
    // Other domains: [0, lo) and [hi, p). Four partial sums break the addition chain.
    double acc[4] = {0, 0, 0, 0};
    int32_t count[4] = {0, 0, 0, 0};
    for (auto [begin, end] : {std::pair{0, lo}, std::pair{hi, p}}) {
      int32_t d = begin;
      for (; d + 4 <= end; d += 4) {
        for (int32_t k = 0; k < 4; ++k) {
          const double x = row[d + k];
          const auto flow = static_cast<int32_t>(x > 0);
          acc[k] += x;
          count[k] += flow;
          col_bytes[d + k] += x;
          col_flows[d + k] += flow;
        }
      }
      for (; d < end; ++d) {
        const double x = row[d];
        const auto flow = static_cast<int32_t>(x > 0);
        acc[0] += x;
        count[0] += flow;
        col_bytes[d] += x;
        col_flows[d] += flow;
      }
    }
    network_out_[i] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    network_out_flows_[i] = (count[0] + count[1]) + (count[2] + count[3]);
    // Own domain, in destination order (as the exact model sums it).
    uint8_t* domain_flags = &domain_flow_[domain_flag_begin_[i]];
    double nvlink_bytes = 0;
    int32_t nvlink_flows = 0;
    for (int32_t j = lo; j < hi; ++j) {
      const double x = j == i ? 0.0 : row[j];
      const bool flow = x > 0;
      domain_flags[j - lo] = static_cast<uint8_t>(flow);
      nvlink_flows += static_cast<int32_t>(flow);
      if (flow) {
        nvlink_bytes += x;
        nvlink_in_[j] += x;
      }
    }
    nvlink_out_[i] = nvlink_bytes;
    // Own leaf, other domains.
    double leaf_bytes = 0;
    int32_t leaf_flows = 0;
    for (int64_t k = leaf_begin_[i]; k < leaf_begin_[i + 1]; ++k) {
      const int32_t j = leaf_peers_[k];
      const double x = row[j];
      const auto flow = static_cast<int32_t>(x > 0);
      leaf_flow_[k] = static_cast<uint8_t>(flow);
      leaf_bytes += x;
      leaf_flows += flow;
      leaf_in_[j] += x;
      leaf_in_flows_[j] += flow;
    }
    leaf_out_[i] = leaf_bytes;
    leaf_out_flows_[i] = leaf_flows;
    flows += network_out_flows_[i] + nvlink_flows;
  }
  num_flows_ = flows;
}

void FactoredBottleneckModel::load_links() {
  const auto p = static_cast<int32_t>(participants_.size());
  link_bytes_.assign(inv_capacity_s_per_byte_.size(), 0.0);
  std::fill(leaf_up_bytes_.begin(), leaf_up_bytes_.end(), 0.0);
  std::fill(leaf_down_bytes_.begin(), leaf_down_bytes_.end(), 0.0);
  for (int32_t i = 0; i < p; ++i) {
    const int32_t g = participants_[i].value;
    if (nvlink_out_[i] > 0) link_bytes_[nvlink_up_[g]] += nvlink_out_[i];
    if (nvlink_in_[i] > 0) link_bytes_[nvlink_down_[g]] += nvlink_in_[i];
    if (network_out_[i] > 0) link_bytes_[nic_up_[g]] += network_out_[i];
    if (network_in_[i] > 0) link_bytes_[nic_down_[g]] += network_in_[i];
    // Through a spine: the network bytes not kept under the leaf. Flow counts decide whether
    // there are any (the difference of sums of non-integral bytes may be a rounding residue).
    if (network_out_flows_[i] > leaf_out_flows_[i]) {
      leaf_up_bytes_[leaf_idx_[g]] += std::max(0.0, network_out_[i] - leaf_out_[i]);
    }
    if (network_in_flows_[i] > leaf_in_flows_[i]) {
      leaf_down_bytes_[leaf_idx_[g]] += std::max(0.0, network_in_[i] - leaf_in_[i]);
    }
  }
  // Spread evenly over the leaf's spine links.
  for (size_t leaf = 0; leaf < uplinks_.size(); ++leaf) {
    for (auto [bytes, leaf_links] : {std::pair{leaf_up_bytes_[leaf], &uplinks_[leaf]},
                                     std::pair{leaf_down_bytes_[leaf], &downlinks_[leaf]}}) {
      if (bytes <= 0) continue;
      MOESIM_CHECK(!leaf_links->empty(), "traffic through a spine from a leaf without spines");
      const double per_link = bytes / static_cast<double>(leaf_links->size());
      for (int32_t l : *leaf_links) link_bytes_[l] = per_link;
    }
  }
  link_time_s_.resize(link_bytes_.size());
  for (size_t l = 0; l < link_bytes_.size(); ++l) {
    link_time_s_[l] = link_bytes_[l] * inv_capacity_s_per_byte_[l];
  }
  for (size_t leaf = 0; leaf < uplinks_.size(); ++leaf) {
    double up_s = 0;
    double down_s = 0;
    for (int32_t l : uplinks_[leaf]) up_s = std::max(up_s, link_time_s_[l]);
    for (int32_t l : downlinks_[leaf]) down_s = std::max(down_s, link_time_s_[l]);
    leaf_up_time_s_[leaf] = up_s;
    leaf_down_time_s_[leaf] = down_s;
  }
}

double FactoredBottleneckModel::finish_times() {
  const auto p = static_cast<int32_t>(participants_.size());
  const double* t = link_time_s_.data();
  send_done_s_.assign(p, 0.0);
  recv_done_s_.assign(p, 0.0);
  double* send = send_done_s_.data();
  double* recv = recv_done_s_.data();
  // finish = max(link times) + latency = max(each link time + latency): the rounded addition is
  // monotone, so per pair it is max(source side, destination side).
  for (int32_t i = 0; i < p; ++i) {
    const int32_t g = participants_[i].value;
    double send_s = 0;
    const uint8_t* domain_flags = &domain_flow_[domain_flag_begin_[i]];
    const int32_t lo = domain_begin_[i];
    if (nvlink_up_[g] >= 0) {  // a domain of more than one GPU
      const double src_s = t[nvlink_up_[g]] + nvlink_latency_s_;
      for (int32_t j = lo; j < domain_end_[i]; ++j) {
        if (!domain_flags[j - lo]) continue;
        const double finish_s =
            std::max(src_s, t[nvlink_down_[participants_[j].value]] + nvlink_latency_s_);
        send_s = std::max(send_s, finish_s);
        recv[j] = std::max(recv[j], finish_s);
      }
    }
    if (leaf_begin_[i] < leaf_begin_[i + 1]) {
      const double src_s = t[nic_up_[g]] + leaf_latency_s_;
      for (int64_t k = leaf_begin_[i]; k < leaf_begin_[i + 1]; ++k) {
        if (!leaf_flow_[k]) continue;
        const int32_t j = leaf_peers_[k];
        const double finish_s =
            std::max(src_s, t[nic_down_[participants_[j].value]] + leaf_latency_s_);
        send_s = std::max(send_s, finish_s);
        recv[j] = std::max(recv[j], finish_s);
      }
    }
    send[i] = send_s;
  }
  // Through a spine: each side per GPU. The other side is the latest over the GPUs at the other
  // end of spine flows that can be this GPU's peers (not under its leaf, not in its domain):
  // sides sorted latest first, the first eligible one (at most leaf + domain size steps).
  spine_src_.clear();
  spine_dst_.clear();
  for (int32_t i = 0; i < p; ++i) {
    const int32_t g = participants_[i].value;
    if (network_out_flows_[i] > leaf_out_flows_[i]) {
      spine_src_.push_back(
          {std::max(t[nic_up_[g]], leaf_up_time_s_[leaf_idx_[g]]) + spine_latency_s_, i});
    }
    if (network_in_flows_[i] > leaf_in_flows_[i]) {
      spine_dst_.push_back(
          {std::max(t[nic_down_[g]], leaf_down_time_s_[leaf_idx_[g]]) + spine_latency_s_, i});
    }
  }
  auto latest_first = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::sort(spine_src_.begin(), spine_src_.end(), latest_first);
  std::sort(spine_dst_.begin(), spine_dst_.end(), latest_first);
  auto latest_peer = [&](const std::vector<std::pair<double, int32_t>>& sides, int32_t i) {
    const int32_t leaf = leaf_idx_[participants_[i].value];
    for (const auto& [side_s, j] : sides) {
      if (leaf_idx_[participants_[j].value] != leaf && domain_begin_[j] != domain_begin_[i]) {
        return side_s;
      }
    }
    return 0.0;
  };
  for (const auto& [src_s, i] : spine_src_) {
    send[i] = std::max(send[i], std::max(src_s, latest_peer(spine_dst_, i)));
  }
  for (const auto& [dst_s, j] : spine_dst_) {
    recv[j] = std::max(recv[j], std::max(dst_s, latest_peer(spine_src_, j)));
  }
  double duration_s = 0;
  for (int32_t i = 0; i < p; ++i) duration_s = std::max(duration_s, send[i]);
  return duration_s;
}

}  // namespace moesim::sim
