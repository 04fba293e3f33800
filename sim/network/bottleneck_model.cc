#include "sim/network/bottleneck_model.h"

#include <algorithm>

namespace moesim::sim {
namespace {

// from_seconds() for seconds >= 0 without the libm call: llround's half-away-from-zero is
// truncation plus one when the fraction is >= 0.5 (the subtraction is exact below 2^52, and
// above it every double is an integer).
SimTime round_to_ns(double seconds) {
  const double ns = seconds * static_cast<double>(kNsPerS);
  const auto whole = static_cast<SimTime>(ns);
  return whole + static_cast<SimTime>(ns - static_cast<double>(whole) >= 0.5);
}

}  // namespace

BottleneckModel::BottleneckModel(const Topology& topology) : topology_(topology) {
  const auto& links = topology.links();
  num_links_ = links.size();
  const int32_t g = topology.num_gpus();
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      max_route_links_ = std::max(max_route_links_,
                                  static_cast<int32_t>(topology.route(GpuId(s), GpuId(d)).size()));
    }
  }
  const size_t num_pairs = static_cast<size_t>(g) * static_cast<size_t>(g);
  padded_routes_.assign(num_pairs * max_route_links_, static_cast<int32_t>(num_links_));
  route_latency_s_.resize(num_pairs);
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      const size_t pair = static_cast<size_t>(s) * g + d;
      const std::span<const int32_t> route = topology.route(GpuId(s), GpuId(d));
      std::copy(route.begin(), route.end(), padded_routes_.begin() + pair * max_route_links_);
      route_latency_s_[pair] = to_seconds(topology.route_latency_ns(GpuId(s), GpuId(d)));
    }
  }
  inv_capacity_s_per_byte_.resize(num_links_ + 1);
  capacity_bytes_per_s_.resize(num_links_);
  for (size_t l = 0; l < num_links_; ++l) {
    inv_capacity_s_per_byte_[l] = 1.0 / links[l].capacity_bytes_per_s;
    capacity_bytes_per_s_[l] = links[l].capacity_bytes_per_s;
  }
  inv_capacity_s_per_byte_[num_links_] = 0.0;  // the dummy link never delays a flow
  link_bytes_.assign(num_links_ + 1, 0.0);
  link_time_s_.assign(num_links_ + 1, 0.0);
  build_structured_tables();
}

void BottleneckModel::build_structured_tables() {
  const int32_t g = topology_.num_gpus();
  const auto dummy = static_cast<int32_t>(num_links_);
  if (num_links_ + 1 >= 0xFFFF || max_route_links_ > 4) return;
  enum Role : uint8_t { kUnused, kFirst, kLast, kMiddle };
  std::vector<uint8_t> role(num_links_, kUnused);
  auto claim = [&](int32_t link, Role r) {
    if (role[link] != kUnused && role[link] != r) return false;
    role[link] = r;
    return true;
  };
  // Slot of `link` in the two-entry table at `table`, adding it when there is room; -1 if full.
  auto slot_of = [dummy](int32_t* table, int32_t link) {
    for (int32_t k = 0; k < 2; ++k) {
      if (table[k] == link) return k;
      if (table[k] == dummy) {
        table[k] = link;
        return k;
      }
    }
    return -1;
  };
  const size_t num_pairs = static_cast<size_t>(g) * static_cast<size_t>(g);
  egress_links_.assign(static_cast<size_t>(g) * 2, dummy);
  ingress_links_.assign(static_cast<size_t>(g) * 2, dummy);
  pair_code_.assign(num_pairs, 0);
  no_mids_ = static_cast<uint32_t>(dummy) | (static_cast<uint32_t>(dummy) << 16);
  pair_mids_.assign(num_pairs, no_mids_);
  latency_class_s_.clear();
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      if (s == d) continue;
      const size_t pair = static_cast<size_t>(s) * g + d;
      const std::span<const int32_t> route = topology_.route(GpuId(s), GpuId(d));
      if (route.size() < 2 || route.size() > 4) return;
      const int32_t first = route.front();
      const int32_t last = route.back();
      const int32_t out_slot = slot_of(&egress_links_[static_cast<size_t>(s) * 2], first);
      const int32_t in_slot = slot_of(&ingress_links_[static_cast<size_t>(d) * 2], last);
      if (out_slot < 0 || in_slot < 0 || !claim(first, kFirst) || !claim(last, kLast)) return;
      uint32_t mids = no_mids_;
      if (route.size() >= 3) {
        if (!claim(route[1], kMiddle)) return;
        mids = (mids & 0xFFFF0000u) | static_cast<uint32_t>(route[1]);
      }
      if (route.size() == 4) {
        if (!claim(route[2], kMiddle)) return;
        mids = (mids & 0xFFFFu) | (static_cast<uint32_t>(route[2]) << 16);
      }
      pair_mids_[pair] = mids;
      const double lat_s = route_latency_s_[pair];
      auto it = std::find(latency_class_s_.begin(), latency_class_s_.end(), lat_s);
      const auto cls = static_cast<int32_t>(it - latency_class_s_.begin());
      if (it == latency_class_s_.end()) {
        if (cls >= 64) return;
        latency_class_s_.push_back(lat_s);
      }
      pair_code_[pair] = static_cast<uint8_t>(out_slot | (in_slot << 1) | (cls << 2));
    }
  }
  structured_ = true;
}

void BottleneckModel::run(const TrafficMatrix& traffic, CollectiveResult& result) {
  const int32_t p = traffic.size();
  const int32_t base = p > 0 ? traffic.gpu(0).value : 0;
  bool consecutive = structured_;
  for (int32_t i = 1; i < p && consecutive; ++i) consecutive = traffic.gpu(i).value == base + i;
  if (!consecutive) {
    run_reference(traffic, result);
    return;
  }
  const size_t g = static_cast<size_t>(topology_.num_gpus());
  const size_t pp = static_cast<size_t>(p);
  const auto dummy = static_cast<int32_t>(num_links_);
  // Only the links of this collective's routes are zeroed, loaded and scanned: the participants'
  // egress and ingress links, and the middle links that a flow uses (bytes > 0, so a middle
  // link still at 0 bytes is seen for the first time).
  for (int32_t l : touched_links_) link_bytes_[l] = 0.0;
  touched_links_.clear();
  for (size_t i = 0; i < 2 * pp; ++i) {
    const size_t slot = 2 * static_cast<size_t>(base) + i;
    if (egress_links_[slot] != dummy) touched_links_.push_back(egress_links_[slot]);
    if (ingress_links_[slot] != dummy) touched_links_.push_back(ingress_links_[slot]);
  }
  // The flows of every row, compacted without data-dependent branches: rows are often sparse
  // (hierarchical dispatch) and a branch per entry would mispredict.
  flow_dst_.resize(pp * pp + 1);
  flow_begin_.resize(pp + 1);
  int32_t num_flows = 0;
  for (int32_t s = 0; s < p; ++s) {
    const double* row = traffic.row(s).data();
    int32_t* out = flow_dst_.data() + num_flows;
    int32_t k = 0;
    for (int32_t d = 0; d < p; ++d) {
      out[k] = d;
      k += static_cast<int32_t>(row[d] > 0) & static_cast<int32_t>(d != s);
    }
    flow_begin_[s] = num_flows;
    num_flows += k;
  }
  flow_begin_[p] = num_flows;
  // Pass 1: link loads. Every link receives its additions in (source, destination) order, as in
  // run_reference(): a link is the egress link of one GPU, the ingress link of one GPU or a
  // middle link, never two of these.
  double* link_bytes = link_bytes_.data();
  for (int32_t s = 0; s < p; ++s) {
    const size_t src_pair = (static_cast<size_t>(base) + s) * g + base;
    const double* row = traffic.row(s).data();
    const uint8_t* code = &pair_code_[src_pair];
    const uint32_t* mids = &pair_mids_[src_pair];
    const int32_t* out_links = &egress_links_[(static_cast<size_t>(base) + s) * 2];
    // Egress: run_reference() sums a row's consecutive flows over the same first link in a
    // register and flushes the sum when the first link changes; do exactly that.
    int32_t first_link = dummy;
    double first_link_bytes = 0;
    for (int32_t f = flow_begin_[s]; f < flow_begin_[s + 1]; ++f) {
      const int32_t d = flow_dst_[f];
      const double bytes = row[d];
      const uint8_t c = code[d];
      const int32_t link = out_links[c & 1];
      if (link != first_link) {
        link_bytes[first_link] += first_link_bytes;
        first_link = link;
        first_link_bytes = 0;
      }
      first_link_bytes += bytes;
      link_bytes[ingress_links_[(static_cast<size_t>(base) + d) * 2 + ((c >> 1) & 1)]] += bytes;
      const uint32_t m = mids[d];
      if (m != no_mids_) {
        for (const int32_t link :
             {static_cast<int32_t>(m & 0xFFFFu), static_cast<int32_t>(m >> 16)}) {
          if (link_bytes[link] == 0 && link != dummy) touched_links_.push_back(link);
          link_bytes[link] += bytes;
        }
      }
    }
    link_bytes[first_link] += first_link_bytes;
  }
  link_bytes[dummy] = 0.0;
  for (int32_t l : touched_links_) link_time_s_[l] = link_bytes[l] * inv_capacity_s_per_byte_[l];
  // Pass 2: finish times. Maxima are exact in any order.
  send_done_s_.assign(pp, 0.0);
  recv_done_s_.assign(pp, 0.0);
  double* recv = recv_done_s_.data();
  const double* lat = latency_class_s_.data();
  const double* link_time = link_time_s_.data();
  double duration_s = 0;
  for (int32_t s = 0; s < p; ++s) {
    const size_t src_pair = (static_cast<size_t>(base) + s) * g + base;
    const uint8_t* code = &pair_code_[src_pair];
    const uint32_t* mids = &pair_mids_[src_pair];
    const int32_t* out_links = &egress_links_[(static_cast<size_t>(base) + s) * 2];
    const double tout[2] = {link_time[out_links[0]], link_time[out_links[1]]};
    double send_s = 0;
    for (int32_t f = flow_begin_[s]; f < flow_begin_[s + 1]; ++f) {
      const int32_t d = flow_dst_[f];
      const uint8_t c = code[d];
      const uint32_t m = mids[d];
      const double t_in =
          link_time[ingress_links_[(static_cast<size_t>(base) + d) * 2 + ((c >> 1) & 1)]];
      const double t_mid = std::max(link_time[m & 0xFFFFu], link_time[m >> 16]);
      const double finish_s = std::max(std::max(tout[c & 1], t_in), t_mid) + lat[c >> 2];
      send_s = std::max(send_s, finish_s);
      recv[d] = std::max(recv[d], finish_s);
    }
    send_done_s_[s] = send_s;
    duration_s = std::max(duration_s, send_s);
  }
  finish_result(p, num_flows, duration_s, result);
}

void BottleneckModel::run_reference(const TrafficMatrix& traffic, CollectiveResult& result) {
  const int32_t p = traffic.size();
  const size_t g = static_cast<size_t>(topology_.num_gpus());
  const size_t r = static_cast<size_t>(max_route_links_);
  std::fill(link_bytes_.begin(), link_bytes_.end(), 0.0);
  touched_links_.resize(num_links_);
  for (size_t l = 0; l < num_links_; ++l) touched_links_[l] = static_cast<int32_t>(l);
  int32_t num_flows = 0;
  for (int32_t s = 0; s < p; ++s) {
    const size_t src_row = static_cast<size_t>(traffic.gpu(s).value) * g;
    const std::span<const double> row = traffic.row(s);
    // The first link (the source's egress) repeats across a row: summing it in a register avoids
    // a store-to-load dependency chain through link_bytes_.
    int32_t first_link = static_cast<int32_t>(num_links_);
    double first_link_bytes = 0;
    for (int32_t d = 0; d < p; ++d) {
      const double bytes = row[d];
      if (bytes <= 0 || d == s) continue;
      ++num_flows;
      const int32_t* route = &padded_routes_[(src_row + traffic.gpu(d).value) * r];
      if (route[0] != first_link) {
        link_bytes_[first_link] += first_link_bytes;
        first_link = route[0];
        first_link_bytes = 0;
      }
      first_link_bytes += bytes;
      for (size_t k = 1; k < r; ++k) link_bytes_[route[k]] += bytes;
    }
    link_bytes_[first_link] += first_link_bytes;
  }
  for (size_t l = 0; l <= num_links_; ++l) {
    link_time_s_[l] = link_bytes_[l] * inv_capacity_s_per_byte_[l];
  }
  send_done_s_.assign(p, 0.0);
  recv_done_s_.assign(p, 0.0);
  double duration_s = 0;
  for (int32_t s = 0; s < p; ++s) {
    const size_t src_row = static_cast<size_t>(traffic.gpu(s).value) * g;
    const std::span<const double> row = traffic.row(s);
    double send_s = 0;
    for (int32_t d = 0; d < p; ++d) {
      if (row[d] <= 0 || d == s) continue;
      const size_t pair = src_row + traffic.gpu(d).value;
      const int32_t* route = &padded_routes_[pair * r];
      double drain_s = 0;
      for (size_t k = 0; k < r; ++k) drain_s = std::max(drain_s, link_time_s_[route[k]]);
      const double finish_s = drain_s + route_latency_s_[pair];
      send_s = std::max(send_s, finish_s);
      recv_done_s_[d] = std::max(recv_done_s_[d], finish_s);
    }
    send_done_s_[s] = send_s;
    duration_s = std::max(duration_s, send_s);
  }
  finish_result(p, num_flows, duration_s, result);
}

void BottleneckModel::finish_result(int32_t num_participants, int32_t num_flows, double duration_s,
                                    CollectiveResult& result) {
  const int32_t p = num_participants;
  result.num_flows = num_flows;
  result.duration_ns = round_to_ns(duration_s);
  result.send_done_ns.resize(p);
  result.recv_done_ns.resize(p);
  result.barrier_wait_ns.resize(p);
  for (int32_t i = 0; i < p; ++i) {
    result.send_done_ns[i] = round_to_ns(send_done_s_[i]);
    result.recv_done_ns[i] = round_to_ns(recv_done_s_[i]);
    result.barrier_wait_ns[i] = result.duration_ns - result.recv_done_ns[i];
  }
  // The bottleneck link as set_bottleneck() picks it: the largest bytes / capacity (a division),
  // lowest id on ties, among the links that carry bytes (all in touched_links_). link_time_s_
  // (bytes x 1 / capacity) is within a few ulps of that ratio, so only links within a relative
  // 1e-12 of the largest link time can win; divide just those.
  double max_time_s = 0;
  for (int32_t l : touched_links_) max_time_s = std::max(max_time_s, link_time_s_[l]);
  const double threshold_s = max_time_s * (1.0 - 1e-12);
  int32_t best = -1;
  double best_time_s = 0;
  for (int32_t l : touched_links_) {
    if (link_bytes_[l] <= 0 || link_time_s_[l] < threshold_s) continue;
    const double time_s = link_bytes_[l] / capacity_bytes_per_s_[l];
    if (time_s > best_time_s || (time_s == best_time_s && best >= 0 && l < best)) {
      best_time_s = time_s;
      best = l;
    }
  }
  result.bottleneck_link = best;
  if (best < 0) {
    result.bottleneck_class = LinkClass::kNvlink;
    result.bottleneck_bytes = 0;
    result.bottleneck_capacity_bytes_per_s = 0;
    return;
  }
  result.bottleneck_class = topology_.links()[best].link_class;
  result.bottleneck_bytes = link_bytes_[best];
  result.bottleneck_capacity_bytes_per_s = capacity_bytes_per_s_[best];
}

}  // namespace moesim::sim
