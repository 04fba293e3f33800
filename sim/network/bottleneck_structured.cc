// The structured path of BottleneckModel::run() (bottleneck_model.h): link loads summed per route
// class with table-lookup finish times when every byte count is integral, else link loads in the
// reference's order over the compacted flows. Both give run_reference()'s result bit for bit.
#include <algorithm>
#include <bit>
#include <limits>

#include "sim/network/bottleneck_model.h"

namespace moesim::sim {
namespace {

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

}  // namespace

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

}  // namespace moesim::sim
