#include "sim/network/max_min_fluid.h"

#include <algorithm>
#include <functional>

#include "base/check.h"

namespace moesim::sim {

namespace {

// Flows whose time to finish is within this relative margin of the next event finish with it.
constexpr double kFinishRelTol = 1e-9;

}  // namespace

void MaxMinFluid::reset(std::span<const double> link_capacity_bytes_per_s) {
  capacity_.assign(link_capacity_bytes_per_s.begin(), link_capacity_bytes_per_s.end());
  for (double c : capacity_) MOESIM_CHECK(c > 0, "link capacity must be positive");
  now_s_ = 0;
  num_done_ = 0;
  started_ = false;
  rates_stale_ = true;
  route_begin_.assign(1, 0);
  route_links_.clear();
  flow_bytes_.clear();
  start_s_.clear();
  remaining_.clear();
  rate_.clear();
  finish_s_.clear();
  state_.clear();
  waiting_order_.clear();
  next_waiting_ = 0;
  active_.clear();
}

int32_t MaxMinFluid::add_flow(std::span<const int32_t> route, double bytes, double start_delay_s) {
  MOESIM_CHECK(!started_, "add_flow after the first event");
  MOESIM_CHECK(bytes > 0 && start_delay_s >= 0 && !route.empty(), "bad flow");
  for (int32_t l : route) {
    MOESIM_CHECK(l >= 0 && l < static_cast<int32_t>(capacity_.size()), "link id out of range");
  }
  route_links_.insert(route_links_.end(), route.begin(), route.end());
  route_begin_.push_back(static_cast<int32_t>(route_links_.size()));
  flow_bytes_.push_back(bytes);
  start_s_.push_back(start_delay_s);
  remaining_.push_back(bytes);
  rate_.push_back(0);
  finish_s_.push_back(kInfinity);
  state_.push_back(State::kWaiting);
  return num_flows() - 1;
}

void MaxMinFluid::build_link_index() {
  const size_t num_links = capacity_.size();
  link_begin_.assign(num_links + 1, 0);
  for (int32_t l : route_links_) ++link_begin_[l + 1];
  for (size_t l = 0; l < num_links; ++l) link_begin_[l + 1] += link_begin_[l];
  link_flows_.resize(route_links_.size());
  std::vector<int32_t> fill(link_begin_.begin(), link_begin_.end() - 1);
  for (int32_t f = 0; f < num_flows(); ++f) {
    for (int32_t i = route_begin_[f]; i < route_begin_[f + 1]; ++i) {
      link_flows_[fill[route_links_[i]]++] = f;
    }
  }
  waiting_order_.resize(flow_bytes_.size());
  for (int32_t f = 0; f < num_flows(); ++f) waiting_order_[f] = f;
  std::stable_sort(waiting_order_.begin(), waiting_order_.end(),
                   [this](int32_t a, int32_t b) { return start_s_[a] < start_s_[b]; });
  next_waiting_ = 0;
  cap_left_.resize(num_links);
  num_unfixed_.resize(num_links);
  fixed_.resize(flow_bytes_.size());
  started_ = true;
  advance(0);  // starts the flows with zero delay
}

void MaxMinFluid::compute_rates() {
  rates_stale_ = false;
  std::copy(capacity_.begin(), capacity_.end(), cap_left_.begin());
  std::fill(num_unfixed_.begin(), num_unfixed_.end(), 0);
  for (int32_t f : active_) {
    fixed_[f] = 0;
    for (int32_t i = route_begin_[f]; i < route_begin_[f + 1]; ++i) ++num_unfixed_[route_links_[i]];
  }
  heap_.clear();
  for (size_t l = 0; l < capacity_.size(); ++l) {
    if (num_unfixed_[l] > 0) heap_.emplace_back(cap_left_[l] / num_unfixed_[l], l);
  }
  // Min-heap on (fair share, link id): ties go to the lower link id, so the result is
  // deterministic (and, being max-min fair, unique anyway).
  const auto later = std::greater<std::pair<double, int32_t>>();
  std::make_heap(heap_.begin(), heap_.end(), later);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const auto [share, l] = heap_.back();
    heap_.pop_back();
    if (num_unfixed_[l] == 0) continue;
    if (std::max(0.0, cap_left_[l]) / num_unfixed_[l] != share) continue;  // stale entry
    for (int32_t i = link_begin_[l]; i < link_begin_[l + 1]; ++i) {
      const int32_t f = link_flows_[i];
      if (state_[f] != State::kActive || fixed_[f]) continue;
      fixed_[f] = 1;
      rate_[f] = share;
      for (int32_t j = route_begin_[f]; j < route_begin_[f + 1]; ++j) {
        const int32_t l2 = route_links_[j];
        cap_left_[l2] -= share;
        --num_unfixed_[l2];
        if (l2 != l && num_unfixed_[l2] > 0) {
          heap_.emplace_back(std::max(0.0, cap_left_[l2]) / num_unfixed_[l2], l2);
          std::push_heap(heap_.begin(), heap_.end(), later);
        }
      }
    }
  }
}

double MaxMinFluid::next_event_delay_s() {
  if (!started_) build_link_index();
  if (rates_stale_) compute_rates();
  double delay_s = kInfinity;
  for (int32_t f : active_) {
    MOESIM_CHECK(rate_[f] > 0, "transferring flow without bandwidth");
    delay_s = std::min(delay_s, remaining_[f] / rate_[f]);
  }
  if (next_waiting_ < waiting_order_.size()) {
    delay_s = std::min(delay_s, std::max(0.0, start_s_[waiting_order_[next_waiting_]] - now_s_));
  }
  return delay_s;
}

void MaxMinFluid::advance(double delta_s) {
  if (!started_) build_link_index();
  MOESIM_CHECK(delta_s >= 0, "negative time step");
  if (rates_stale_ && delta_s > 0) compute_rates();
  const double new_now_s = now_s_ + delta_s;
  const double finish_limit_s = delta_s * (1 + kFinishRelTol);
  size_t kept = 0;
  for (int32_t f : active_) {
    const double time_to_finish_s = remaining_[f] / rate_[f];
    if (delta_s > 0 && time_to_finish_s <= finish_limit_s) {
      remaining_[f] = 0;
      rate_[f] = 0;
      finish_s_[f] = new_now_s;
      state_[f] = State::kDone;
      ++num_done_;
      rates_stale_ = true;
    } else {
      remaining_[f] -= rate_[f] * delta_s;
      active_[kept++] = f;
    }
  }
  active_.resize(kept);
  const double start_limit_s = new_now_s * (1 + 1e-12) + 1e-18;
  while (next_waiting_ < waiting_order_.size() &&
         start_s_[waiting_order_[next_waiting_]] <= start_limit_s) {
    const int32_t f = waiting_order_[next_waiting_++];
    state_[f] = State::kActive;
    active_.push_back(f);
    rates_stale_ = true;
  }
  now_s_ = new_now_s;
}

void MaxMinFluid::run_to_completion() {
  while (!done()) {
    const double delay_s = next_event_delay_s();
    if (!(delay_s < kInfinity)) return;  // flows that never finish (see the header)
    advance(delay_s);
  }
}

}  // namespace moesim::sim
