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
  fold_exact();
  fold(value);
}

void PercentileSketch::fold_exact() {
  for (double v : exact_) fold(v);
  exact_.clear();
  exact_.shrink_to_fit();
}

void PercentileSketch::merge(const PercentileSketch& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  sum_ += other.sum_;
  if (num_folded_ == 0 && other.num_folded_ == 0 &&
      exact_.size() + other.exact_.size() <= kExactSamples) {
    exact_.insert(exact_.end(), other.exact_.begin(), other.exact_.end());
    return;
  }
  fold_exact();
  for (double v : other.exact_) fold(v);
  if (other.buckets_.empty()) return;
  if (buckets_.empty()) buckets_.resize(other.buckets_.size());
  for (size_t hi = 0; hi < other.buckets_.size(); ++hi) {
    if (!other.buckets_[hi]) continue;
    if (!buckets_[hi]) buckets_[hi] = std::make_unique<ExponentBuckets>(ExponentBuckets{});
    for (size_t lo = 0; lo < kMantissaBuckets; ++lo)
      (*buckets_[hi])[lo] += (*other.buckets_[hi])[lo];
  }
  num_folded_ += other.num_folded_;
}

std::vector<std::pair<double, int64_t>> PercentileSketch::ascending() const {
  std::vector<std::pair<double, int64_t>> out;
  if (exact()) {
    std::vector<double> v = exact_;
    std::sort(v.begin(), v.end());
    for (double x : v) {
      if (!out.empty() && out.back().first == x) {
        ++out.back().second;
      } else {
        out.emplace_back(x, 1);
      }
    }
    return out;
  }
  for (size_t hi = 0; hi < buckets_.size(); ++hi) {
    if (!buckets_[hi]) continue;
    for (size_t lo = 0; lo < kMantissaBuckets; ++lo) {
      const int64_t n = (*buckets_[hi])[lo];
      if (n > 0)
        out.emplace_back(std::clamp(bucket_mid(hi * kMantissaBuckets + lo), min_, max_), n);
    }
  }
  return out;
}

Percentiles PercentileSketch::summary_with_censored(std::vector<double> censored) const {
  if (censored.empty()) return summary();
  std::sort(censored.begin(), censored.end());
  Percentiles p = count_ > 0 ? summary() : Percentiles{};
  p.num_censored = static_cast<int64_t>(censored.size());
  // Kaplan-Meier: S drops by the factor (1 - d / n) at each observed value, n the values (observed
  // or censored) not below it; a censored value equal to an observed one is still at risk there.
  const std::vector<std::pair<double, int64_t>> events = ascending();
  const std::array<double, 3> qs = {0.50, 0.90, 0.99};
  std::array<double*, 3> out = {&p.p50, &p.p90, &p.p99};
  std::array<bool, 3> set = {false, false, false};
  auto at_risk = static_cast<double>(count_ + p.num_censored);
  size_t ci = 0;
  double surv = 1.0;
  for (const auto& [value, deaths] : events) {
    while (ci < censored.size() && censored[ci] < value) {
      at_risk -= 1;
      ++ci;
    }
    surv *= 1.0 - static_cast<double>(deaths) / at_risk;
    at_risk -= static_cast<double>(deaths);
    for (size_t k = 0; k < qs.size(); ++k) {
      if (!set[k] && 1.0 - surv >= qs[k] - 1e-12) {
        *out[k] = value;
        set[k] = true;
      }
    }
  }
  const double largest = std::max(count_ > 0 ? max_ : 0.0, censored.back());
  std::array<bool*, 3> bound = {&p.lower_bound.p50, &p.lower_bound.p90, &p.lower_bound.p99};
  for (size_t k = 0; k < qs.size(); ++k) {
    if (set[k]) continue;
    *out[k] = largest;
    *bound[k] = true;
  }
  return p;
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
    case RequestOutcome::kInFlight: {
      ++num_in_flight_;
      const double waited_ms = to_ms(end_ns - r.arrival_ns);
      censored_e2e_.push_back(waited_ms);
      if (r.first_scheduled_ns < 0) censored_queueing_.push_back(waited_ms);
      if (r.first_token_ns < 0) {
        ++num_waiting_first_token_;
        max_wait_first_token_ms_ = std::max(max_wait_first_token_ms_, waited_ms);
        censored_ttft_.push_back(waited_ms);
      } else if (r.output_tokens >= 2) {
        censored_tpot_.push_back(to_ms(end_ns - r.first_token_ns) /
                                 static_cast<double>(r.output_tokens - 1));
      }
      break;
    }
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

void RequestStats::merge(const RequestStats& o) {
  num_arrived_ += o.num_arrived_;
  num_completed_ += o.num_completed_;
  num_rejected_ += o.num_rejected_;
  num_in_flight_ += o.num_in_flight_;
  num_waiting_first_token_ += o.num_waiting_first_token_;
  max_wait_first_token_ms_ = std::max(max_wait_first_token_ms_, o.max_wait_first_token_ms_);
  in_tokens_ += o.in_tokens_;
  out_tokens_ += o.out_tokens_;
  slo_.num_met += o.slo_.num_met;
  slo_.num_decided += o.slo_.num_decided;
  queueing_.merge(o.queueing_);
  ttft_.merge(o.ttft_);
  tpot_.merge(o.tpot_);
  e2e_.merge(o.e2e_);
  kv_load_.merge(o.kv_load_);
  prefill_.merge(o.prefill_);
  auto append = [](std::vector<double>& to, const std::vector<double>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  append(censored_queueing_, o.censored_queueing_);
  append(censored_ttft_, o.censored_ttft_);
  append(censored_tpot_, o.censored_tpot_);
  append(censored_e2e_, o.censored_e2e_);
}

}  // namespace moesim::sim
