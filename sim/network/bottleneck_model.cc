#include "sim/network/bottleneck_model.h"

#include <algorithm>
#include <bit>
#include <limits>

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

constexpr double kTwoPow52 = 4503599627370496.0;

// Whether every entry is a non-negative integer, or one that the caller's check of the total
// (below 2^52) rejects: (x + 2^52) - 2^52 is x rounded to an integer for 0 <= x < 2^52, so its
// bits equal x's exactly for the integers there (+0 included); they also do for some x >= 2^52,
// infinity and NaN, all of which make the total fail. Branch-free so that it vectorises.
bool integral_bytes(const double* row, int32_t n) {
  uint64_t bad = 0;
  for (int32_t i = 0; i < n; ++i) {
    const double x = row[i];
    const uint64_t bits = std::bit_cast<uint64_t>(x);
    bad |= (std::bit_cast<uint64_t>((x + kTwoPow52) - kTwoPow52) ^ bits) | (bits >> 63);
  }
  return bad == 0;
}

// Rows ahead whose block the per-class pass prefetches.
constexpr size_t kPrefetchRows = 4;

// Destinations per block of the per-class passes: a block's (destination, class) table stays in
// the L1 cache (16 KiB), a multiple of 8.
size_t destinations_per_block(size_t num_classes_with_none) {
  return std::max<size_t>(8, (2048 / num_classes_with_none) & ~size_t{7});
}

// The route classes of the structured path (see the header) over the window's GPUs, when its
// routes have them.
void build_structured_tables(const Topology& topology, size_t num_links, BottleneckWindow& t) {
  const int32_t g = t.count;
  const int32_t base = t.base;
  const auto dummy = static_cast<int32_t>(num_links);
  enum Role : uint8_t { kUnused, kFirst, kLast, kMiddle };
  std::vector<uint8_t> role(num_links, kUnused);
  auto claim = [&](int32_t link, Role r) {
    if (role[link] != kUnused && role[link] != r) return false;
    role[link] = r;
    return true;
  };
  // Per GPU, the distinct links its routes start with / continue with (as a source) and end
  // with / end with but one (as a destination), then sorted by id.
  enum Side { kSrcFirst, kSrcSecond, kDstLast, kDstBeforeLast, kNumSides };
  std::vector<std::vector<int32_t>> ends[kNumSides];
  for (auto& side : ends) side.resize(g);
  auto add = [](std::vector<int32_t>& set, int32_t link) {
    if (std::find(set.begin(), set.end(), link) == set.end()) set.push_back(link);
  };
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      if (s == d) continue;
      const Route route = topology.route(GpuId(base + s), GpuId(base + d));
      const size_t n = route.size();
      if (n < 2 || n > 4 || !claim(route.front(), kFirst) || !claim(route.back(), kLast)) return;
      if (n >= 3 && !claim(route[1], kMiddle)) return;
      if (n == 4 && !claim(route[2], kMiddle)) return;
      add(ends[kSrcFirst][s], route.front());
      add(ends[kDstLast][d], route.back());
      if (n >= 3) add(ends[kSrcSecond][s], route[1]);
      if (n == 4) add(ends[kDstBeforeLast][d], route[2]);
    }
  }
  for (auto& side : ends) {
    for (std::vector<int32_t>& set : side) {
      if (set.size() >= 0xFF) return;
      std::sort(set.begin(), set.end());
    }
  }
  // Classes by key (the four end-link indices, 0xFF where absent, and the latency index), ids in
  // first-seen order; per (GPU, class) the links on its side, in tables of stride 256 until the
  // number of classes is known.
  constexpr int32_t kMaxClasses = 0xFF;  // class 255 is "none"
  auto index_of = [](const std::vector<int32_t>& set, int32_t link) -> uint64_t {
    return static_cast<uint64_t>(std::lower_bound(set.begin(), set.end(), link) - set.begin());
  };
  std::vector<uint64_t> class_keys;
  std::vector<double> latencies_s;
  std::vector<int32_t> src_links(static_cast<size_t>(g) * 256 * 2, dummy);
  std::vector<int32_t> dst_links(static_cast<size_t>(g) * 256 * 2, dummy);
  t.pair_class.assign(static_cast<size_t>(g) * g, 0);
  t.class_latency_s.clear();
  uint64_t last_key = ~uint64_t{0};
  int32_t last_class = 0;
  for (int32_t s = 0; s < g; ++s) {
    for (int32_t d = 0; d < g; ++d) {
      if (s == d) continue;
      const size_t pair = static_cast<size_t>(s) * g + d;
      const Route route = topology.route(GpuId(base + s), GpuId(base + d));
      const size_t n = route.size();
      const int32_t second = n >= 3 ? route[1] : dummy;
      const int32_t before_last = n == 4 ? route[2] : dummy;
      const double lat_s = to_seconds(topology.route_latency_ns(GpuId(base + s), GpuId(base + d)));
      auto lat_it = std::find(latencies_s.begin(), latencies_s.end(), lat_s);
      if (lat_it == latencies_s.end()) lat_it = latencies_s.insert(lat_it, lat_s);
      const uint64_t key = index_of(ends[kSrcFirst][s], route.front()) |
                           (n >= 3 ? index_of(ends[kSrcSecond][s], second) : 0xFF) << 8 |
                           index_of(ends[kDstLast][d], route.back()) << 16 |
                           (n == 4 ? index_of(ends[kDstBeforeLast][d], before_last) : 0xFF) << 24 |
                           static_cast<uint64_t>(lat_it - latencies_s.begin()) << 32;
      if (key != last_key) {
        auto it = std::find(class_keys.begin(), class_keys.end(), key);
        if (it == class_keys.end()) {
          if (static_cast<int32_t>(class_keys.size()) == kMaxClasses) return;
          it = class_keys.insert(it, key);
          t.class_latency_s.push_back(lat_s);
        }
        last_key = key;
        last_class = static_cast<int32_t>(it - class_keys.begin());
      }
      t.pair_class[pair] = static_cast<uint8_t>(last_class);
      int32_t* src = &src_links[(static_cast<size_t>(s) * 256 + last_class) * 2];
      int32_t* dst = &dst_links[(static_cast<size_t>(d) * 256 + last_class) * 2];
      src[0] = route.front();
      src[1] = second;
      dst[0] = route.back();
      dst[1] = before_last;
    }
  }
  t.num_classes = static_cast<int32_t>(class_keys.size());
  const size_t cc = static_cast<size_t>(t.num_classes) + 1;
  for (int32_t i = 0; i < g; ++i) t.pair_class[static_cast<size_t>(i) * g + i] = t.num_classes;
  t.src_links.assign(static_cast<size_t>(g) * cc * 2, dummy);
  t.dst_links.assign(static_cast<size_t>(g) * cc * 2, dummy);
  for (size_t gpu = 0; gpu < static_cast<size_t>(g); ++gpu) {
    std::copy_n(&src_links[gpu * 256 * 2], t.num_classes * 2, &t.src_links[gpu * cc * 2]);
    std::copy_n(&dst_links[gpu * 256 * 2], t.num_classes * 2, &t.dst_links[gpu * cc * 2]);
  }
  t.class_latency_s.push_back(0.0);  // "none": never read for a flow
  t.structured = true;
}

}  // namespace

std::shared_ptr<BottleneckTables> build_bottleneck_tables(const Topology& topology) {
  auto tables = std::make_shared<BottleneckTables>();
  BottleneckTables& t = *tables;
  const auto& links = topology.links();
  t.num_links = links.size();
  t.inv_capacity_s_per_byte.resize(t.num_links + 1);
  t.capacity_bytes_per_s.resize(t.num_links);
  for (size_t l = 0; l < t.num_links; ++l) {
    t.inv_capacity_s_per_byte[l] = 1.0 / links[l].capacity_bytes_per_s;
    t.capacity_bytes_per_s[l] = links[l].capacity_bytes_per_s;
  }
  t.inv_capacity_s_per_byte[t.num_links] = 0.0;  // the dummy link never delays a flow
  return tables;
}

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

bool BottleneckModel::load_links_by_class(const TrafficMatrix& traffic, const BottleneckWindow& w,
                                          int32_t& num_flows) {
  const int32_t p = traffic.size();
  const size_t pp = static_cast<size_t>(p);
  const int32_t num_classes = w.num_classes;
  const size_t cc = static_cast<size_t>(num_classes) + 1;
  const auto none = static_cast<uint8_t>(num_classes);
  double* link_bytes = link_bytes_.data();
  const size_t block = destinations_per_block(cc);
  // Non-integral bytes (e.g. hierarchical dispatch's estimated relay rows) usually show in the
  // first row: give up before any work. So does a sparse matrix (hierarchical dispatch: a GPU
  // sends to its node and to one relay per other node), whose compacted flows are fewer than the
  // pairs this path visits.
  if (p > 0) {
    // A support smaller than half a row leaves fewer flows than that in the first row.
    if (traffic.has_support() && 2 * static_cast<int64_t>(traffic.support(0).size()) < p) {
      return false;
    }
    const double* row = traffic.row(0).data();
    if (!integral_bytes(row, static_cast<int32_t>(std::min(pp, block)))) return false;
    int32_t first_row_flows = 0;
    for (int32_t d = 0; d < p; ++d) first_row_flows += static_cast<int32_t>(row[d] > 0);
    if (2 * first_row_flows < p) return false;
  }
  row_acc_.assign(pp * cc, 0.0);
  col_acc_.assign(pp * cc, 0.0);
  flow_class_.resize(pp * pp);
  double* col = col_acc_.data();
  int64_t flows = 0;
  // Bytes per (source, class) and (destination, class), destinations in blocks. Zero entries add
  // nothing; the diagonal is class "none", whose sums are never charged.
  for (size_t d0 = 0; d0 < pp; d0 += block) {
    const size_t d1 = std::min(pp, d0 + block);
    for (size_t s = 0; s < pp; ++s) {
      const double* row = traffic.row(static_cast<int32_t>(s)).data();
      if (s + kPrefetchRows < pp) {
        // Rows are 8 x P bytes apart: the hardware prefetchers do not follow block columns.
        const size_t ahead = s + kPrefetchRows;
        const double* next = traffic.row(static_cast<int32_t>(ahead)).data();
        for (size_t d = d0; d < d1; d += 8) __builtin_prefetch(next + d);
        for (size_t d = d0; d < d1; d += 64) {
          __builtin_prefetch(&w.pair_class[ahead * pp + d]);
          __builtin_prefetch(&flow_class_[ahead * pp + d], 1);
        }
      }
      if (!integral_bytes(row + d0, static_cast<int32_t>(d1 - d0))) return false;
      const uint8_t* cls = &w.pair_class[s * pp];
      uint8_t* out = &flow_class_[s * pp];
      double* acc = &row_acc_[s * cc];
      int32_t k = 0;
      for (size_t d = d0; d < d1; ++d) {
        const double bytes = row[d];
        const uint8_t c = cls[d];
        acc[c] += bytes;
        col[d * cc + c] += bytes;
        const bool flow = bytes > 0;
        const auto no_flow = static_cast<uint8_t>(-static_cast<int32_t>(!flow));
        out[d] = static_cast<uint8_t>((c & ~no_flow) | (none & no_flow));
        k += static_cast<int32_t>(flow);
      }
      flows += k;
    }
  }
  // Charge the sums to the links.
  double total_bytes = 0;
  for (size_t s = 0; s < pp; ++s) {
    flows -=
        static_cast<int64_t>(traffic.bytes(static_cast<int32_t>(s), static_cast<int32_t>(s)) > 0);
    const int32_t* links = &w.src_links[s * cc * 2];
    const double* sums = &row_acc_[s * cc];
    for (int32_t c = 0; c < num_classes; ++c) {
      if (sums[c] == 0) continue;
      link_bytes[links[2 * c]] += sums[c];
      link_bytes[links[2 * c + 1]] += sums[c];
      total_bytes += sums[c];
    }
  }
  // Every link's load is at most the total: exact while the total stays below 2^52.
  if (!(total_bytes < kTwoPow52)) {
    for (int32_t l : touched_links_) link_bytes[l] = 0.0;  // clean for the fallback
    return false;
  }
  for (size_t d = 0; d < pp; ++d) {
    const int32_t* links = &w.dst_links[d * cc * 2];
    const double* sums = &col[d * cc];
    for (int32_t c = 0; c < num_classes; ++c) {
      if (sums[c] == 0) continue;
      link_bytes[links[2 * c]] += sums[c];
      link_bytes[links[2 * c + 1]] += sums[c];
    }
  }
  num_flows = static_cast<int32_t>(flows);
  return true;
}

double BottleneckModel::run_ordered(const TrafficMatrix& traffic, const BottleneckWindow& w,
                                    int32_t& num_flows) {
  const int32_t p = traffic.size();
  const size_t pp = static_cast<size_t>(p);
  const size_t cc = static_cast<size_t>(w.num_classes) + 1;
  const auto none = static_cast<uint8_t>(w.num_classes);
  const auto dummy = static_cast<int32_t>(num_links_);
  double* link_bytes = link_bytes_.data();
  // The flows of every row, compacted without data-dependent branches: rows are often sparse
  // (hierarchical dispatch) and a branch per entry would mispredict. With a row support, only
  // its entries are candidates (the others are +0.0, no flow).
  flow_dst_.resize(pp * pp + 1);
  flow_begin_.resize(pp + 1);
  int32_t flows = 0;
  const bool has_support = traffic.has_support();
  for (size_t s = 0; s < pp; ++s) {
    const double* row = traffic.row(static_cast<int32_t>(s)).data();
    const uint8_t* cls = &w.pair_class[s * pp];
    int32_t* out = flow_dst_.data() + flows;
    int32_t k = 0;
    if (has_support) {
      for (const int32_t d : traffic.support(static_cast<int32_t>(s))) {
        out[k] = d;
        k += static_cast<int32_t>(row[d] > 0) & static_cast<int32_t>(cls[d] != none);
      }
    } else {
      for (int32_t d = 0; d < p; ++d) {
        out[k] = d;
        k += static_cast<int32_t>(row[d] > 0) & static_cast<int32_t>(cls[d] != none);
      }
    }
    flow_begin_[s] = flows;
    flows += k;
  }
  flow_begin_[pp] = flows;
  num_flows = flows;
  // Link loads. run_reference() sums a row's consecutive flows over the same first link in a
  // register and flushes the sum when the first link changes; do exactly that. Every other link
  // receives each flow's bytes directly.
  for (size_t s = 0; s < pp; ++s) {
    const double* row = traffic.row(static_cast<int32_t>(s)).data();
    const uint8_t* cls = &w.pair_class[s * pp];
    const int32_t* src_links = &w.src_links[s * cc * 2];
    int32_t first_link = dummy;
    double first_link_bytes = 0;
    for (int32_t f = flow_begin_[s]; f < flow_begin_[s + 1]; ++f) {
      const int32_t d = flow_dst_[f];
      const double bytes = row[d];
      const uint8_t c = cls[d];
      const int32_t link = src_links[2 * c];
      if (link != first_link) {
        link_bytes[first_link] += first_link_bytes;
        first_link = link;
        first_link_bytes = 0;
      }
      first_link_bytes += bytes;
      const int32_t* dst_links = &w.dst_links[(d * cc + c) * 2];
      link_bytes[dst_links[0]] += bytes;
      // Middle links; not through the dummy link, which would chain every flow's additions.
      if (src_links[2 * c + 1] != dummy) link_bytes[src_links[2 * c + 1]] += bytes;
      if (dst_links[1] != dummy) link_bytes[dst_links[1]] += bytes;
    }
    link_bytes[first_link] += first_link_bytes;
  }
  set_link_times();
  // Finish times, flow by flow. Maxima are exact in any order.
  const double* link_time = link_time_s_.data();
  const double* lat = w.class_latency_s.data();
  send_done_s_.assign(pp, 0.0);
  recv_done_s_.assign(pp, 0.0);
  double* recv = recv_done_s_.data();
  double duration_s = 0;
  for (size_t s = 0; s < pp; ++s) {
    const uint8_t* cls = &w.pair_class[s * pp];
    const int32_t* src_links = &w.src_links[s * cc * 2];
    double send_s = 0;
    for (int32_t f = flow_begin_[s]; f < flow_begin_[s + 1]; ++f) {
      const int32_t d = flow_dst_[f];
      const uint8_t c = cls[d];
      const int32_t* dst_links = &w.dst_links[(d * cc + c) * 2];
      const double drain_s =
          std::max(std::max(link_time[src_links[2 * c]], link_time[src_links[2 * c + 1]]),
                   std::max(link_time[dst_links[0]], link_time[dst_links[1]]));
      const double finish_s = drain_s + lat[c];
      send_s = std::max(send_s, finish_s);
      recv[d] = std::max(recv[d], finish_s);
    }
    send_done_s_[s] = send_s;
    duration_s = std::max(duration_s, send_s);
  }
  return duration_s;
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

double BottleneckModel::finish_times(const BottleneckWindow& w) {
  const size_t pp = static_cast<size_t>(w.count);
  const int32_t num_classes = w.num_classes;
  const size_t cc = static_cast<size_t>(num_classes) + 1;
  const double* link_time = link_time_s_.data();
  const double* lat = w.class_latency_s.data();
  constexpr double kNoFlow = -std::numeric_limits<double>::infinity();
  // The latest drain of a class's route links on the source's side ([s * cc + c]) and on the
  // destination's side ([d * cc + c]), plus the class latency; -infinity for "none".
  row_acc_.resize(pp * cc);
  col_acc_.resize(pp * cc);
  for (auto [table, out] :
       {std::pair{&w.src_links, &row_acc_}, std::pair{&w.dst_links, &col_acc_}}) {
    for (size_t i = 0; i < pp; ++i) {
      const int32_t* links = &(*table)[i * cc * 2];
      double* side = &(*out)[i * cc];
      for (int32_t c = 0; c < num_classes; ++c) {
        side[c] = std::max(link_time[links[2 * c]], link_time[links[2 * c + 1]]) + lat[c];
      }
      side[num_classes] = kNoFlow;
    }
  }
  send_done_s_.assign(pp, 0.0);
  recv_done_s_.assign(pp, 0.0);
  double* send = send_done_s_.data();
  double* recv = recv_done_s_.data();
  const double* col = col_acc_.data();
  const size_t block = destinations_per_block(cc);
  for (size_t d0 = 0; d0 < pp; d0 += block) {
    const size_t d1 = std::min(pp, d0 + block);
    for (size_t s = 0; s < pp; ++s) {
      const double* acc = &row_acc_[s * cc];
      const uint8_t* cls = &flow_class_[s * pp];
      double send_s = send[s];
      for (size_t d = d0; d < d1; ++d) {
        const uint8_t c = cls[d];
        const double finish_s = std::max(acc[c], col[d * cc + c]);
        send_s = std::max(send_s, finish_s);
        recv[d] = std::max(recv[d], finish_s);
      }
      send[s] = send_s;
    }
  }
  double duration_s = 0;
  for (size_t s = 0; s < pp; ++s) duration_s = std::max(duration_s, send[s]);
  return duration_s;
}

void BottleneckModel::size_link_arrays() {
  // Sized at the first run, not at construction: a replica on the fast tier may never run one
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
