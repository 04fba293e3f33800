#include "sim/study/multiplier_search.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <system_error>
#include <thread>
#include <vector>

#include "base/check.h"

namespace moesim::sim::study {
namespace {

// The search's decisions, one probe at a time: next() is the multiplier to probe (none: done),
// record() takes its verdict. The one place of the bracketing and bisection rules; a value
// type, so speculation can copy it and play out verdicts it does not have yet.
class SearchState {
 public:
  SearchState(double rel_tolerance, int32_t max_doublings)
      : rel_tolerance_(rel_tolerance), max_doublings_(max_doublings) {}

  std::optional<double> next() const {
    switch (phase_) {
      case Phase::kFirst:
        return 1.0;
      case Phase::kUp:
        return lo_ * 2.0;
      case Phase::kDown:
        return hi_ / 2.0;
      case Phase::kBisect:
        return std::sqrt(lo_ * hi_);
      case Phase::kDone:
        break;
    }
    return std::nullopt;
  }

  void record(bool meets) {
    const double m = *next();
    ++num_probes_;
    switch (phase_) {
      case Phase::kFirst:
        (meets ? lo_ : hi_) = m;
        if (max_doublings_ > 0) {
          phase_ = meets ? Phase::kUp : Phase::kDown;
        } else {
          bracketed();
        }
        break;
      case Phase::kUp:
        ++num_doublings_;
        if (meets) {
          lo_ = m;
          if (num_doublings_ == max_doublings_) bracketed();
        } else {
          hi_ = m;
          bracketed();
        }
        break;
      case Phase::kDown:
        ++num_doublings_;
        if (meets) {
          lo_ = m;
          bracketed();
        } else {
          hi_ = m;
          if (num_doublings_ == max_doublings_) bracketed();
        }
        break;
      case Phase::kBisect:
        (meets ? lo_ : hi_) = m;
        bracketed();
        break;
      case Phase::kDone:
        MOESIM_CHECK(false, "a verdict after the search ended");
    }
  }

  // Whether a later probe of the search can be at m: every one lies above the highest meeting
  // multiplier and below the lowest failing one (doubling, halving and bisection alike), and
  // those bounds only tighten.
  bool may_need(double m) const {
    return phase_ != Phase::kDone && !(lo_ > 0 && m <= lo_) && !(hi_ > 0 && m >= hi_);
  }

  MultiplierSearch result() const {
    MultiplierSearch s;
    s.found = lo_ > 0;
    s.max_ok = lo_;
    s.min_fail = hi_;
    s.num_probes = num_probes_;
    return s;
  }

 private:
  enum class Phase { kFirst, kUp, kDown, kBisect, kDone };
  // The bracket is set (or bracketing gave up): bisect it down to the tolerance.
  void bracketed() {
    phase_ = lo_ > 0 && hi_ > 0 && hi_ / lo_ > 1.0 + rel_tolerance_ ? Phase::kBisect : Phase::kDone;
  }

  double rel_tolerance_;
  int32_t max_doublings_;
  Phase phase_ = Phase::kFirst;
  int32_t num_doublings_ = 0;  // doubling (halving) probes so far
  double lo_ = 0, hi_ = 0;     // highest meeting, lowest failing (0: none yet)
  int32_t num_probes_ = 0;
};

// A speculative search: each thread takes the probe the search is most likely to need next
// (pick) that is neither done nor running, and the search walks its decisions over the verdicts
// as they come in (walk). A running probe the search can no longer need is told to stop.
class Speculation {
 public:
  Speculation(const ProbeFunction& meets, SearchState state, const ProbeParallelism& parallel)
      : meets_(meets), state_(state), parallel_(parallel) {}

  MultiplierSearch run() {
    std::vector<std::thread> helpers;
    for (int32_t t = 1; t < parallel_.num_threads; ++t) {
      try {
        helpers.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        break;  // no more threads to be had: fewer probes at a time, the same result
      }
    }
    work();
    for (std::thread& t : helpers) t.join();
    if (parallel_.num_evaluated) *parallel_.num_evaluated = num_evaluated_;
    if (parallel_.num_stopped) *parallel_.num_stopped = num_stopped_;
    if (error_) std::rethrow_exception(error_);
    return state_.result();
  }

 private:
  struct Verdict {
    bool meets = false;
    std::exception_ptr error;
  };

  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      std::optional<double> m = pick();
      if (!m) {
        cv_.wait(lock);
        continue;
      }
      const std::atomic<bool>& stop =
          *running_.emplace(*m, std::make_unique<std::atomic<bool>>(false)).first->second;
      ++num_evaluated_;
      lock.unlock();
      Verdict v;
      try {
        v.meets = meets_(*m, stop);
      } catch (...) {
        v.error = std::current_exception();
      }
      lock.lock();
      running_.erase(*m);
      verdicts_.emplace(*m, v);
      walk();
      stop_unneeded();
      cv_.notify_all();
    }
  }

  // Tells the running probes the search can no longer need to stop.
  void stop_unneeded() {
    for (auto& [m, stop] : running_) {
      if ((done_ || !state_.may_need(m)) && !stop->load(std::memory_order_relaxed)) {
        stop->store(true, std::memory_order_relaxed);
        ++num_stopped_;
      }
    }
  }

  // Takes the verdicts the search needs next, in its order, as far as they are in.
  void walk() {
    while (!done_) {
      std::optional<double> m = state_.next();
      if (!m) {
        done_ = true;
        break;
      }
      auto it = verdicts_.find(*m);
      if (it == verdicts_.end()) break;
      if (it->second.error) {
        error_ = it->second.error;
        done_ = true;
        break;
      }
      try {
        if (parallel_.kept) parallel_.kept(*m);
      } catch (...) {
        error_ = std::current_exception();
        done_ = true;
        break;
      }
      state_.record(it->second.meets);
    }
  }

  // The multiplier the search is most likely to need next that is neither probed nor running;
  // none when every multiplier the search can still need is. Every verdict not in yet counts as
  // even odds, so the most likely is the one fewest such verdicts away (breadth first over the
  // decisions from here, through the verdicts already in); ties: the one found first, taking the
  // meeting branch before the failing one (the next doubling before a bisection, a bisection
  // before the next halving, the upper half of a bracket before the lower).
  std::optional<double> pick() const {
    struct Node {
      int32_t depth;  // verdicts not in yet on the way here
      int64_t order;
      SearchState state;
    };
    auto later = [](const Node& a, const Node& b) {
      return a.depth > b.depth || (a.depth == b.depth && a.order > b.order);
    };
    std::priority_queue<Node, std::vector<Node>, decltype(later)> queue(later);
    int64_t order = 0;
    queue.push({0, order++, state_});
    while (!queue.empty()) {
      Node n = queue.top();
      queue.pop();
      std::optional<double> m = n.state.next();
      if (!m) continue;
      auto it = verdicts_.find(*m);
      if (it == verdicts_.end() && !running_.count(*m)) return m;
      if (it != verdicts_.end()) {
        if (it->second.error) continue;  // the search would stop there
        Node child = n;
        child.order = order++;
        child.state.record(it->second.meets);
        queue.push(child);
        continue;
      }
      for (bool meets : {true, false}) {
        Node child = n;
        ++child.depth;
        child.order = order++;
        child.state.record(meets);
        queue.push(child);
      }
    }
    return std::nullopt;
  }

  const ProbeFunction& meets_;
  SearchState state_;
  const ProbeParallelism& parallel_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<double, Verdict> verdicts_;
  std::map<double, std::unique_ptr<std::atomic<bool>>> running_;  // with their stop flags
  bool done_ = false;
  std::exception_ptr error_;
  int32_t num_evaluated_ = 0;
  int32_t num_stopped_ = 0;
};

}  // namespace

MultiplierSearch search_max_multiplier(const ProbeFunction& meets, double rel_tolerance,
                                       int32_t max_doublings, const ProbeParallelism& parallel) {
  MOESIM_CHECK(rel_tolerance > 0 && max_doublings >= 0 && parallel.num_threads >= 1,
               "search options");
  SearchState state(rel_tolerance, max_doublings);
  if (parallel.num_threads > 1) return Speculation(meets, state, parallel).run();
  const std::atomic<bool> never(false);
  while (std::optional<double> m = state.next()) {
    const bool ok = meets(*m, never);
    if (parallel.kept) parallel.kept(*m);
    state.record(ok);
  }
  if (parallel.num_evaluated) *parallel.num_evaluated = state.result().num_probes;
  if (parallel.num_stopped) *parallel.num_stopped = 0;
  return state.result();
}

MultiplierSearch search_max_multiplier(const std::function<bool(double)>& meets,
                                       double rel_tolerance, int32_t max_doublings,
                                       const ProbeParallelism& parallel) {
  const ProbeFunction probe = [&meets](double m, const std::atomic<bool>&) { return meets(m); };
  return search_max_multiplier(probe, rel_tolerance, max_doublings, parallel);
}

}  // namespace moesim::sim::study
