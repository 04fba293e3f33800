#include "sim/network/bottleneck_model.h"

#include <algorithm>

#include "base/check.h"

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

BottleneckModel::BottleneckModel(const Topology& topology)
    : BottleneckModel(topology, build_bottleneck_tables(topology)) {}

BottleneckModel::BottleneckModel(const Topology& topology, std::shared_ptr<BottleneckTables> tables)
    : topology_(topology),
      tables_(std::move(tables)),
      num_links_(tables_->num_links),
      inv_capacity_s_per_byte_(tables_->inv_capacity_s_per_byte),
      capacity_bytes_per_s_(tables_->capacity_bytes_per_s) {}

std::unique_ptr<NetworkModel> BottleneckModel::fresh_copy() const {
  return std::make_unique<BottleneckModel>(topology_, tables_);
}

const BottleneckWindow& BottleneckModel::window(int32_t base, int32_t count) {
  if (window_ && window_->base == base && window_->count == count) return *window_;
  std::lock_guard<std::mutex> lock(tables_->mutex);
  for (const auto& w : tables_->windows) {
    if (w->base == base && w->count == count) {
      window_ = w;
      return *window_;
    }
  }
  auto w = std::make_shared<BottleneckWindow>();
  w->base = base;
  w->count = count;
  build_structured_tables(topology_, num_links_, *w);
  tables_->windows.push_back(w);
  window_ = std::move(w);
  return *window_;
}

bool BottleneckModel::structured() { return window(0, topology_.num_gpus()).structured; }

void BottleneckModel::select_links(const BottleneckWindow& w) {
  if (links_window_ == &w) return;
  const size_t cc = static_cast<size_t>(w.num_classes) + 1;
  touched_links_.clear();
  link_seen_.assign(num_links_ + 1, 0);
  link_seen_[num_links_] = 1;  // the dummy link is never touched
  for (const std::vector<int32_t>* table : {&w.src_links, &w.dst_links}) {
    const size_t end = static_cast<size_t>(w.count) * cc * 2;
    for (size_t i = 0; i < end; ++i) {
      const int32_t link = (*table)[i];
      if (link_seen_[link]) continue;
      link_seen_[link] = 1;
      touched_links_.push_back(link);
    }
  }
  links_window_ = &w;
}

void BottleneckModel::run(const TrafficMatrix& traffic, CollectiveResult& result) {
  size_link_arrays();
  const int32_t p = traffic.size();
  const int32_t base = p > 0 ? traffic.gpu(0).value : 0;
  bool consecutive = p > 0;
  for (int32_t i = 1; i < p && consecutive; ++i) consecutive = traffic.gpu(i).value == base + i;
  const BottleneckWindow* w = consecutive ? &window(base, p) : nullptr;
  if (w == nullptr || !w->structured) {
    run_reference(traffic, result);
    return;
  }
  // Only the links of this collective's routes are zeroed, loaded and scanned (the last run's
  // links are the only ones that may hold bytes).
  for (int32_t l : touched_links_) link_bytes_[l] = 0.0;
  select_links(*w);
  int32_t num_flows = 0;
  double duration_s = 0;
  if (load_links_by_class(traffic, *w, num_flows)) {
    set_link_times();
    duration_s = finish_times(*w);
  } else {
    duration_s = run_ordered(traffic, *w, num_flows);
  }
  finish_result(p, num_flows, duration_s, result);
}

void BottleneckModel::set_link_times() {
  link_bytes_[num_links_] = 0.0;
  // The largest link time too; maxima are exact in any order: four chains, so that their
  // latencies overlap.
  const int32_t* touched = touched_links_.data();
  const size_t num_touched = touched_links_.size();
  double* link_time = link_time_s_.data();
  double max_s[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= num_touched; i += 4) {
    for (size_t j = 0; j < 4; ++j) {
      const int32_t l = touched[i + j];
      link_time[l] = link_bytes_[l] * inv_capacity_s_per_byte_[l];
      max_s[j] = std::max(max_s[j], link_time[l]);
    }
  }
  for (; i < num_touched; ++i) {
    const int32_t l = touched[i];
    link_time[l] = link_bytes_[l] * inv_capacity_s_per_byte_[l];
    max_s[0] = std::max(max_s[0], link_time[l]);
  }
  max_link_time_s_ = std::max(std::max(max_s[0], max_s[1]), std::max(max_s[2], max_s[3]));
  link_time_s_[num_links_] = 0.0;
  if (!slowdown_.empty()) {
    for (i = 0; i < num_touched; ++i) {
      const int32_t l = touched[i];
      link_time[l] *= slowdown_[l];
      max_link_time_s_ = std::max(max_link_time_s_, link_time[l]);
    }
  }
}

bool BottleneckModel::set_link_slowdown(std::span<const double> factor_per_link) {
  MOESIM_CHECK(factor_per_link.empty() || factor_per_link.size() == num_links_,
               "a link slowdown per link");
  slowdown_.assign(factor_per_link.begin(), factor_per_link.end());
  return true;
}

void BottleneckModel::size_link_arrays() {
  // Sized at the first run, not at construction: a replica on the fast fidelity may never run one
  // (its per-link arrays would only be memory touched per replica).
  if (!link_bytes_.empty()) return;
  link_bytes_.assign(num_links_ + 1, 0.0);
  link_time_s_.assign(num_links_ + 1, 0.0);
}

void BottleneckModel::run_reference(const TrafficMatrix& traffic, CollectiveResult& result) {
  size_link_arrays();
  const int32_t p = traffic.size();
  std::fill(link_bytes_.begin(), link_bytes_.end(), 0.0);
  touched_links_.resize(num_links_);
  for (size_t l = 0; l < num_links_; ++l) touched_links_[l] = static_cast<int32_t>(l);
  links_window_ = nullptr;
  int32_t num_flows = 0;
  for (int32_t s = 0; s < p; ++s) {
    const GpuId src = traffic.gpu(s);
    const std::span<const double> row = traffic.row(s);
    // The first link (the source's egress) repeats across a row: summing it in a register avoids
    // a store-to-load dependency chain through link_bytes_.
    int32_t first_link = static_cast<int32_t>(num_links_);
    double first_link_bytes = 0;
    for (int32_t d = 0; d < p; ++d) {
      const double bytes = row[d];
      if (bytes <= 0 || d == s) continue;
      ++num_flows;
      const Route route = topology_.route(src, traffic.gpu(d));
      if (route[0] != first_link) {
        link_bytes_[first_link] += first_link_bytes;
        first_link = route[0];
        first_link_bytes = 0;
      }
      first_link_bytes += bytes;
      for (size_t k = 1; k < route.size(); ++k) link_bytes_[route[k]] += bytes;
    }
    link_bytes_[first_link] += first_link_bytes;
  }
  for (size_t l = 0; l <= num_links_; ++l) {
    link_time_s_[l] = link_bytes_[l] * inv_capacity_s_per_byte_[l];
  }
  for (size_t l = 0; l < slowdown_.size(); ++l) link_time_s_[l] *= slowdown_[l];
  max_link_time_s_ = 0;
  for (size_t l = 0; l < num_links_; ++l) {
    max_link_time_s_ = std::max(max_link_time_s_, link_time_s_[l]);
  }
  send_done_s_.assign(p, 0.0);
  recv_done_s_.assign(p, 0.0);
  double duration_s = 0;
  for (int32_t s = 0; s < p; ++s) {
    const GpuId src = traffic.gpu(s);
    const std::span<const double> row = traffic.row(s);
    double send_s = 0;
    for (int32_t d = 0; d < p; ++d) {
      if (row[d] <= 0 || d == s) continue;
      const Route route = topology_.route(src, traffic.gpu(d));
      double drain_s = 0;
      for (const int32_t l : route) drain_s = std::max(drain_s, link_time_s_[l]);
      const double finish_s = drain_s + to_seconds(topology_.route_latency_ns(src, traffic.gpu(d)));
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
  // Duration check (issue 19): every GPU's send and receive times are at most duration_s, so
  // this one comparison keeps all the roundings below in range.
  if (!within_horizon_s(duration_s)) [[unlikely]] {
    throw_collective_beyond_horizon(topology_, std::span(link_bytes_.data(), num_links_),
                                    duration_s);
  }
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
  const double* link_time = link_time_s_.data();
  const double threshold_s = max_link_time_s_ * (1.0 - 1e-12);
  int32_t best = -1;
  double best_time_s = 0;
  for (int32_t l : touched_links_) {
    if (link_time[l] < threshold_s || link_bytes_[l] <= 0) continue;
    const double capacity = capacity_bytes_per_s_[l] / (slowdown_.empty() ? 1.0 : slowdown_[l]);
    const double time_s = link_bytes_[l] / capacity;
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
  result.bottleneck_capacity_bytes_per_s =
      capacity_bytes_per_s_[best] / (slowdown_.empty() ? 1.0 : slowdown_[best]);
}

}  // namespace moesim::sim
