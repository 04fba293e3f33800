#include "sim/metrics/request_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/check.h"

namespace moesim::sim {
namespace {

// Low mantissa bits dropped: a bucket keeps the sign, the exponent and 10 mantissa bits.
constexpr int kDroppedBits = 52 - 10;

uint64_t bucket_of(double v) { return std::bit_cast<uint64_t>(v) >> kDroppedBits; }

double bucket_mid(uint64_t key) {
  if (key == 0) return 0;  // zeros (and subnormals below 2^-1012): no relative bound to keep
  const double lo = std::bit_cast<double>(key << kDroppedBits);
  const double hi = std::bit_cast<double>((key + 1) << kDroppedBits);
  return lo + (hi - lo) / 2;
}

}  // namespace

void PercentileSketch::add(double value) {
  MOESIM_CHECK(!std::isnan(value) && value >= 0, "percentile sketch: a negative or NaN value");
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  sum_ += value;
  if (num_folded_ == 0 && exact_.size() < kExactSamples) {
    exact_.push_back(value);
    return;
  }
  if (!exact_.empty()) {
    for (double v : exact_) fold(v);
    exact_.clear();
    exact_.shrink_to_fit();
  }
  fold(value);
}

void PercentileSketch::fold(double value) {
  // value >= 0, and + 0.0 turns -0.0 into 0.0: the sign bit is 0, so key < 2^21.
  const uint64_t key = bucket_of(value + 0.0);
  if (buckets_.empty()) buckets_.resize(size_t{1} << (63 - kDroppedBits - 10));
  std::unique_ptr<ExponentBuckets>& by_mantissa = buckets_[key / kMantissaBuckets];
  if (!by_mantissa) by_mantissa = std::make_unique<ExponentBuckets>(ExponentBuckets{});
  ++(*by_mantissa)[key % kMantissaBuckets];
  ++num_folded_;
}

double PercentileSketch::at_rank(int64_t r) const {
  if (r <= 0) return min_;
  if (r >= count_ - 1) return max_;
  int64_t seen = 0;
  for (size_t hi = 0; hi < buckets_.size(); ++hi) {
    if (!buckets_[hi]) continue;
    for (size_t lo = 0; lo < kMantissaBuckets; ++lo) {
      seen += (*buckets_[hi])[lo];
      if (r < seen) return std::clamp(bucket_mid(hi * kMantissaBuckets + lo), min_, max_);
    }
  }
  return max_;
}

Percentiles PercentileSketch::summary() const {
  if (exact()) return percentiles(exact_);
  Percentiles p;
  p.count = count_;
  auto at = [this](double q) {
    const double pos = q * static_cast<double>(count_ - 1);
    const auto lo = static_cast<int64_t>(std::floor(pos));
    const int64_t hi = std::min(lo + 1, count_ - 1);
    const double frac = pos - static_cast<double>(lo);
    const double v_lo = at_rank(lo);
    return v_lo + (at_rank(hi) - v_lo) * frac;
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.mean = sum_ / static_cast<double>(count_);
  p.max = max_;
  return p;
}

void RequestStats::add(const RequestRecord& r, SimTime end_ns) {
  ++num_arrived_;
  switch (r.outcome) {
    case RequestOutcome::kCompleted:
      ++num_completed_;
      break;
    case RequestOutcome::kRejected:
      ++num_rejected_;
      break;
    case RequestOutcome::kInFlight:
      ++num_in_flight_;
      if (r.first_token_ns < 0) {
        ++num_waiting_first_token_;
        max_wait_first_token_ms_ = std::max(max_wait_first_token_ms_, to_ms(end_ns - r.arrival_ns));
      }
      break;
  }
  if (r.queueing_ns() >= 0) queueing_.add(to_ms(r.queueing_ns()));
  if (r.ttft_ns() >= 0) {
    ttft_.add(to_ms(r.ttft_ns()));
    kv_load_.add(to_ms(r.kv_load_ns));
    prefill_.add(to_ms(r.prefill_ns()));
    in_tokens_ += r.prompt_tokens;
  }
  out_tokens_ += r.generated_tokens;
  const SloStatus st = slo_status(r, end_ns, slo_ttft_ms_, slo_tpot_ms_);
  slo_.num_met += st == SloStatus::kMet;
  slo_.num_decided += st != SloStatus::kUndecided;
  if (r.outcome != RequestOutcome::kCompleted) return;
  e2e_.add(to_ms(r.e2e_ns()));
  const double tp = r.tpot_ns();
  if (tp >= 0) tpot_.add(tp / 1e6);
}

}  // namespace moesim::sim
