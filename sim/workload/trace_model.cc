#include "sim/workload/trace_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "base/check.h"
#include "sim/core/horizon.h"

namespace moesim::sim {
namespace {

// The window's timestamps sit on a lattice when at least this fraction of the gaps between
// distinct timestamps are whole multiples (within 1%) of their median, over at least 10 of them.
constexpr double kLatticeFraction = 0.95;
constexpr double kLatticeTolerance = 0.01;
constexpr size_t kMinLatticeStamps = 10;

// The tick of the lattice the window's timestamps sit on; nullopt when they do not.
std::optional<double> lattice_tick_ns(const std::vector<TraceRecord>& rows, const TraceWindow& w) {
  std::vector<SimTime> stamps;
  for (size_t i = w.begin_idx; i < w.end_idx; ++i) {
    if (stamps.empty() || rows[i].timestamp_ns != stamps.back()) {
      stamps.push_back(rows[i].timestamp_ns);
    }
  }
  if (stamps.size() < kMinLatticeStamps) return std::nullopt;
  std::vector<double> gaps;
  for (size_t i = 1; i < stamps.size(); ++i) {
    gaps.push_back(static_cast<double>(stamps[i] - stamps[i - 1]));
  }
  std::vector<double> sorted = gaps;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double median = sorted[sorted.size() / 2];
  double num_ticks = 0;
  size_t on_lattice = 0;
  for (double g : gaps) {
    const double k = std::round(g / median);
    if (k >= 1 && std::abs(g - k * median) <= kLatticeTolerance * median) ++on_lattice;
    num_ticks += std::max(1.0, k);
  }
  if (static_cast<double>(on_lattice) < kLatticeFraction * static_cast<double>(gaps.size())) {
    return std::nullopt;
  }
  return static_cast<double>(stamps.back() - stamps.front()) / num_ticks;
}

// Rows linked by a private hash id, as lists of row indices in window order.
std::vector<std::vector<size_t>> link_sessions(const std::vector<TraceRecord>& rows,
                                               const TraceWindow& w,
                                               const std::vector<uint64_t>& shared) {
  const size_t n = w.num_rows();
  std::vector<size_t> parent(n);
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto find = [&parent](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::unordered_map<uint64_t, size_t> owner;  // lookups only
  for (size_t i = 0; i < n; ++i) {
    for (uint64_t h : rows[w.begin_idx + i].hash_ids) {
      if (std::binary_search(shared.begin(), shared.end(), h)) continue;
      auto [it, inserted] = owner.emplace(h, i);
      if (!inserted) {
        const size_t a = find(i), b = find(it->second);
        parent[std::max(a, b)] = std::min(a, b);  // the root is the session's first row
      }
    }
  }
  std::vector<std::vector<size_t>> sessions;
  std::vector<size_t> session_of(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t root = find(i);
    if (root == i) {
      session_of[i] = sessions.size();
      sessions.emplace_back();
    }
    sessions[session_of[root]].push_back(i);
  }
  return sessions;
}

// `allow_lattice`: false for warped timestamps (the lattice branch also re-times the turns).
void fit_arrivals(const std::vector<TraceRecord>& rows, const TraceWindow& w,
                  const std::vector<std::vector<size_t>>& linked, bool allow_lattice,
                  TraceModel& m) {
  TraceArrivalFit& a = m.arrival;
  auto stamp = [&](size_t i) { return rows[w.begin_idx + i].timestamp_ns; };
  const SimTime first_ns = stamp(0);
  const std::optional<double> tick = allow_lattice ? lattice_tick_ns(rows, w) : std::nullopt;
  if (tick) {
    a.kind = TraceArrivalFit::Kind::kLattice;
    a.tick_ns = static_cast<SimTime>(std::llround(*tick));
    auto tick_idx = [&](SimTime t) {
      return static_cast<int64_t>(std::llround(static_cast<double>(t - first_ns) / *tick));
    };
    const int64_t last = tick_idx(stamp(w.num_rows() - 1));
    const int64_t num_ticks =
        std::max(last + 1, static_cast<int64_t>(std::llround(w.period_ns / *tick)));
    a.batch_sizes.assign(static_cast<size_t>(num_ticks), 0);
    for (size_t s = 0; s < linked.size(); ++s) {
      const int64_t start = tick_idx(stamp(linked[s][0]));
      ++a.batch_sizes[static_cast<size_t>(start)];
      for (size_t t = 0; t < linked[s].size(); ++t) {
        m.sessions[s].turns[t].offset_ns = (tick_idx(stamp(linked[s][t])) - start) * a.tick_ns;
      }
    }
    return;
  }
  a.kind = TraceArrivalFit::Kind::kRenewal;
  const SimTime first_batch_ns = stamp(linked[0][0]);
  SimTime batch_ns = first_batch_ns;
  a.batch_sizes.push_back(0);
  for (const std::vector<size_t>& s : linked) {
    if (stamp(s[0]) != batch_ns) {
      a.gaps_ns.push_back(stamp(s[0]) - batch_ns);
      batch_ns = stamp(s[0]);
      a.batch_sizes.push_back(0);
    }
    ++a.batch_sizes.back();
  }
  // The seam: from the last batch to the first one of the next lap.
  a.gaps_ns.push_back(w.period_ns - (batch_ns - first_batch_ns));
}

}  // namespace

double TraceArrivalFit::batches_per_s() const {
  if (kind == Kind::kLattice) return 1.0 / to_seconds(tick_ns);
  const double total_ns = std::accumulate(gaps_ns.begin(), gaps_ns.end(), 0.0);
  return static_cast<double>(gaps_ns.size()) / (total_ns / 1e9);
}

double TraceArrivalFit::gap_cv() const {
  if (kind == Kind::kLattice || gaps_ns.empty()) return 0.0;
  const double n = static_cast<double>(gaps_ns.size());
  const double mean = std::accumulate(gaps_ns.begin(), gaps_ns.end(), 0.0) / n;
  double ss = 0;
  for (SimTime g : gaps_ns) ss += (static_cast<double>(g) - mean) * (static_cast<double>(g) - mean);
  return mean > 0 ? std::sqrt(ss / n) / mean : 0.0;
}

double TraceModel::mean_turns_per_session() const {
  size_t turns = 0;
  for (const TraceSession& s : sessions) turns += s.turns.size();
  return static_cast<double>(turns) / static_cast<double>(sessions.size());
}

double TraceModel::rate_per_s() const {
  const std::vector<int32_t>& b = arrival.batch_sizes;
  const double mean_batch =
      std::accumulate(b.begin(), b.end(), 0.0) / static_cast<double>(b.size());
  return arrival.batches_per_s() * mean_batch * mean_turns_per_session();
}

TraceModel fit_trace_model(const std::vector<TraceRecord>& rows, const TraceWindow& w) {
  MOESIM_CHECK(w.num_rows() > 0 && w.period_ns > 0, "trace model of an empty window");
  TraceModel m;
  const std::vector<uint64_t> shared = shared_hash_ids(rows, w);
  m.num_shared_ids = static_cast<int64_t>(shared.size());
  m.first_fresh_id = hash_id_bound(rows, w);
  const std::vector<std::vector<size_t>> linked = link_sessions(rows, w, shared);
  std::unordered_map<uint64_t, uint64_t> local_idx;  // private id -> index in its session
  for (const std::vector<size_t>& rows_of : linked) {
    TraceSession& s = m.sessions.emplace_back();
    const SimTime start_ns = rows[w.begin_idx + rows_of[0]].timestamp_ns;
    for (size_t i : rows_of) {
      const TraceRecord& r = rows[w.begin_idx + i];
      TraceTurn& t = s.turns.emplace_back();
      t.offset_ns = r.timestamp_ns - start_ns;
      t.input_tokens = r.input_tokens;
      t.output_tokens = r.output_tokens;
      m.has_hash_ids = m.has_hash_ids || !r.hash_ids.empty();
      for (uint64_t h : r.hash_ids) {
        if (std::binary_search(shared.begin(), shared.end(), h)) {
          t.hash_ids.push_back(h);
          continue;
        }
        auto [it, inserted] = local_idx.emplace(h, s.num_private_ids);
        if (inserted) ++s.num_private_ids;
        t.hash_ids.push_back(kPrivateHashBit | it->second);
      }
    }
  }
  std::vector<SimTime> start_offsets_ns;
  for (const std::vector<size_t>& rows_of : linked) {
    start_offsets_ns.push_back(rows[w.begin_idx + rows_of[0]].timestamp_ns - w.start_ns);
  }
  m.diurnal = fit_diurnal_shape(start_offsets_ns, w.period_ns);
  if (m.diurnal.empty()) {
    fit_arrivals(rows, w, linked, /*allow_lattice=*/true, m);
  } else {
    // The start process on operational time: the window's timestamps through Lambda.
    std::vector<TraceRecord> warped(w.num_rows());
    for (size_t i = 0; i < warped.size(); ++i) {
      warped[i].timestamp_ns = static_cast<SimTime>(
          std::llround(m.diurnal.operational_ns(rows[w.begin_idx + i].timestamp_ns - w.start_ns)));
    }
    TraceWindow ww;
    ww.end_idx = warped.size();
    ww.period_ns = static_cast<SimTime>(std::llround(m.diurnal.operational_ns(w.period_ns)));
    fit_arrivals(warped, ww, linked, /*allow_lattice=*/false, m);
  }
  for (const TraceSession& s : m.sessions) {
    m.max_session_span_ns = std::max(m.max_session_span_ns, s.turns.back().offset_ns);
  }
  return m;
}

TraceModelSampler::TraceModelSampler(const TraceModel& model, double rate_multiplier)
    : model_(model), rate_multiplier_(rate_multiplier), next_fresh_id_(model.first_fresh_id) {
  MOESIM_CHECK(rate_multiplier > 0, "rate multiplier must be > 0");
  MOESIM_CHECK(!model.sessions.empty(), "trace model without sessions");
  // Steady state at 0: sessions that started up to one session span earlier are under way.
  next_batch_ns_ = model.diurnal.empty()
                       ? -model.max_session_span_ns
                       : static_cast<SimTime>(
                             std::floor(model.diurnal.operational_ns(-model.max_session_span_ns)));
  if (model.arrival.kind == TraceArrivalFit::Kind::kLattice) {
    const double tick_ns = static_cast<double>(model.arrival.tick_ns) / rate_multiplier;
    next_batch_ns_ = -static_cast<SimTime>(
        std::llround(std::ceil(static_cast<double>(model.max_session_span_ns) / tick_ns)) *
        tick_ns);
  }
}

SimTime TraceModelSampler::real_batch_ns() const {
  if (model_.diurnal.empty()) return next_batch_ns_;
  return model_.diurnal.real_ns(static_cast<double>(next_batch_ns_));
}

SimTime TraceModelSampler::draw_gap_ns(RngStream& rng) const {
  const TraceArrivalFit& a = model_.arrival;
  const SimTime trace_gap_ns = a.kind == TraceArrivalFit::Kind::kLattice
                                   ? a.tick_ns
                                   : a.gaps_ns[rng.uniform_int(a.gaps_ns.size())];
  const double gap_s = to_seconds(trace_gap_ns) / rate_multiplier_;
  return within_horizon_s(gap_s) ? from_seconds(gap_s) : kHorizonNs + 1;
}

void TraceModelSampler::start_batch(RngStream& rng) {
  const std::vector<int32_t>& sizes = model_.arrival.batch_sizes;
  const int32_t num_sessions = sizes[rng.uniform_int(sizes.size())];
  const SimTime batch_ns = real_batch_ns();
  for (int32_t i = 0; i < num_sessions; ++i) {
    const auto s_idx = static_cast<uint32_t>(rng.uniform_int(model_.sessions.size()));
    const TraceSession& s = model_.sessions[s_idx];
    for (uint32_t t = 0; t < s.turns.size(); ++t) {
      const SimTime at = batch_ns + s.turns[t].offset_ns;
      if (at > kHorizonNs) break;
      pending_.push(Pending{at, next_seq_++, s_idx, t, next_fresh_id_});
    }
    next_fresh_id_ += s.num_private_ids;
  }
  const SimTime gap_ns = draw_gap_ns(rng);
  if (gap_ns > kHorizonNs || next_batch_ns_ + gap_ns > kHorizonNs) {
    past_horizon_ = true;
  } else {
    next_batch_ns_ += gap_ns;
  }
}

std::optional<TraceDraw> TraceModelSampler::next(RngStream& rng) {
  if (!started_) {
    started_ = true;
    next_batch_ns_ += draw_gap_ns(rng);  // as the arrival processes: one gap after the origin
  }
  while (true) {
    while (!past_horizon_ && (pending_.empty() || pending_.top().arrival_ns > real_batch_ns())) {
      start_batch(rng);
    }
    if (pending_.empty()) return std::nullopt;
    const Pending p = pending_.top();
    pending_.pop();
    if (p.arrival_ns < 0) continue;  // before time 0: only there to reach steady state
    const TraceTurn& turn = model_.sessions[p.session_idx].turns[p.turn_idx];
    TraceDraw d;
    d.arrival_ns = p.arrival_ns;
    d.input_tokens = turn.input_tokens;
    d.output_tokens = turn.output_tokens;
    d.hash_ids.reserve(turn.hash_ids.size());
    for (uint64_t h : turn.hash_ids) {
      d.hash_ids.push_back((h & kPrivateHashBit) ? p.id_base + (h & ~kPrivateHashBit) : h);
    }
    return d;
  }
}

}  // namespace moesim::sim
