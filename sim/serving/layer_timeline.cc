#include "sim/serving/layer_timeline.h"

#include <algorithm>
#include <array>

#include "base/check.h"

namespace moesim::sim {
namespace {

constexpr std::array<const char*, kNumStageOps> kOpNames = {
    "attention_prep", "attention", "router", "dispatch", "shared_experts", "experts", "combine"};
constexpr std::array<std::array<const char*, kNumStageOps>, 2> kSpanNames = {{
    {"attention_prep/mb0", "attention/mb0", "router/mb0", "dispatch/mb0", "shared_experts/mb0",
     "experts/mb0", "combine/mb0"},
    {"attention_prep/mb1", "attention/mb1", "router/mb1", "dispatch/mb1", "shared_experts/mb1",
     "experts/mb1", "combine/mb1"},
}};

size_t op_idx(StageOp op) { return static_cast<size_t>(op); }

// One op of the concatenated stage sequence: the layer (position in the run) and the op.
struct StageItem {
  int32_t layer_pos;
  StageOp op;
};

// Overlap of two sorted lists of disjoint intervals.
double intersection_s(const std::vector<std::pair<double, double>>& a,
                      const std::vector<std::pair<double, double>>& b) {
  double sum = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first);
    const double hi = std::min(a[i].second, b[j].second);
    if (hi > lo) sum += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return sum;
}

// Where `work_s` of compute started at start_s ends: at full rate outside the collectives `comm`
// (sorted, disjoint, each of positive length), at `rate` under them. `first`: the first
// collective that may end after start_s, advanced past those that end before it (a GPU's compute
// starts never decrease).
double shared_end_s(double start_s, double work_s, double rate,
                    const std::vector<std::pair<double, double>>& comm, size_t& first) {
  while (first < comm.size() && comm[first].second <= start_s) ++first;
  double t = start_s, left = work_s;
  for (size_t i = first; i < comm.size(); ++i) {
    const auto [from, to] = comm[i];
    if (from > t) {
      if (left <= from - t) return t + left;
      left -= from - t;
      t = from;
    }
    const double under = (to - t) * rate;
    if (left <= under) return t + left / rate;
    left -= under;
    t = to;
  }
  return t + left;
}

// One run of run_microbatch_timeline(). Collectives are placed in issue order; each GPU's compute
// is placed lazily, in issue order, only as far as the next collective's dependency: a compute op
// issued before a collective may still run under it (the decode pipeline issues micro-batch 0's
// next attention between micro-batch 1's router and dispatch), so its rate is known only once
// every collective that can overlap it is placed. Without sharing this gives the issue-order
// placement exactly.
class Timeline {
 public:
  Timeline(const MicrobatchSchedule& schedule, std::span<const LayerStageCosts> layers,
           const SmSharing& sm, std::vector<double>& clock_s, TimelineTotals& totals,
           bool keep_spans);
  // Places every op and advances the clocks.
  void run();
  void append_spans(std::vector<TimelineSpan>& spans) const;

 private:
  struct Item {
    int32_t mb;
    int32_t layer_pos;
    StageOp op;
  };
  double& end_at(int32_t mb, int32_t l, StageOp op, int32_t g) {
    return end_s_[((static_cast<size_t>(mb) * num_layers_ + l) * kNumStageOps + op_idx(op)) * n_ +
                  g];
  }
  // When micro-batch mb has finished layer l on GPU g (l = -1: the start clock); < 0: not yet.
  double layer_end(int32_t mb, int32_t l, int32_t g);
  // When `it` may start on GPU g as far as its dependency goes; < 0: the dependency is unplaced.
  double ready(const Item& it, int32_t g);
  void place_next_compute(int32_t g);
  void place_comm(size_t i);

  const std::span<const LayerStageCosts> layers_;
  const double rate_;
  std::vector<double>& clock_s_;
  TimelineTotals& totals_;
  const bool keep_spans_;
  const size_t n_;
  const int32_t num_layers_;
  const int32_t num_mb_;
  bool split_attention_ = false, has_shared_ = false;
  std::vector<Item> items_;            // issue order
  std::vector<size_t> compute_items_;  // their positions in items_, compute ops only
  std::vector<double> end_s_;          // per (mb, layer, op, GPU); -1: not placed
  std::vector<size_t> next_compute_;   // per GPU: the next entry of compute_items_
  std::vector<size_t> first_comm_;     // per GPU: shared_end_s()'s cursor
  std::vector<double> compute_free_;   // per GPU
  double comm_free_ = 0;
  bool any_comm_ = false;
  std::vector<std::pair<double, double>> comm_busy_;  // collectives of positive length, in order
  std::vector<std::vector<std::pair<double, double>>> compute_busy_;  // per GPU
  std::vector<double> span_start_, span_dur_, span_lost_;  // per (item, GPU) with keep_spans
};

Timeline::Timeline(const MicrobatchSchedule& schedule, std::span<const LayerStageCosts> layers,
                   const SmSharing& sm, std::vector<double>& clock_s, TimelineTotals& totals,
                   bool keep_spans)
    : layers_(layers),
      rate_(sm.compute_rate()),
      clock_s_(clock_s),
      totals_(totals),
      keep_spans_(keep_spans),
      n_(clock_s.size()),
      num_layers_(static_cast<int32_t>(layers.size())),
      num_mb_(schedule.num_microbatches) {
  MOESIM_CHECK(num_mb_ == 1 || num_mb_ == 2, "one or two micro-batches");
  split_attention_ = schedule.has(StageOp::kAttentionPrep);
  has_shared_ = schedule.has(StageOp::kSharedExperts);
  // Each micro-batch's stage sequence over the layers: a layer's last stage joins the next
  // layer's first (the layers' op lists are concatenated between yield points).
  std::vector<std::vector<StageItem>> stages;
  for (int32_t l = 0; l < num_layers_; ++l) {
    for (size_t s = 0; s < schedule.stages.size(); ++s) {
      if (s > 0 || l == 0) stages.emplace_back();
      for (StageOp op : schedule.stages[s]) stages.back().push_back({l, op});
    }
  }
  // Issue order: micro-batch 0 runs delta_stages stages, then the two alternate stage by stage.
  std::vector<std::pair<int32_t, size_t>> order;  // (micro-batch, stage)
  const size_t num_stages = stages.size();
  if (num_mb_ == 1) {
    for (size_t s = 0; s < num_stages; ++s) order.emplace_back(0, s);
  } else {
    size_t a = 0, b = 0;
    const auto delta = std::min(num_stages, static_cast<size_t>(schedule.delta_stages));
    for (; a < delta; ++a) order.emplace_back(0, a);
    while (a < num_stages || b < num_stages) {
      if (a < num_stages) order.emplace_back(0, a++);
      if (b < num_stages) order.emplace_back(1, b++);
    }
  }
  for (const auto& [mb, s] : order) {
    for (const StageItem& it : stages[s]) {
      if (!is_comm_op(it.op)) compute_items_.push_back(items_.size());
      items_.push_back({mb, it.layer_pos, it.op});
    }
  }
  end_s_.assign(static_cast<size_t>(num_mb_ * num_layers_ * kNumStageOps) * n_, -1.0);
  next_compute_.assign(n_, 0);
  first_comm_.assign(n_, 0);
  compute_free_ = clock_s;
  compute_busy_.resize(n_);
  for (double c : clock_s) {
    MOESIM_CHECK(c >= 0, "timeline clocks start at >= 0");
    comm_free_ = std::max(comm_free_, c);
  }
  if (keep_spans_) {
    for (auto* v : {&span_start_, &span_dur_, &span_lost_}) v->assign(items_.size() * n_, 0.0);
  }
}

double Timeline::layer_end(int32_t mb, int32_t l, int32_t g) {
  if (l < 0) return clock_s_[g];
  const double combine = end_at(mb, l, StageOp::kCombine, g);
  if (!has_shared_) return combine;
  const double shared = end_at(mb, l, StageOp::kSharedExperts, g);
  return combine < 0 || shared < 0 ? -1.0 : std::max(combine, shared);
}

double Timeline::ready(const Item& it, int32_t g) {
  const int32_t mb = it.mb, l = it.layer_pos;
  switch (it.op) {
    case StageOp::kAttentionPrep:
      return layer_end(mb, l - 1, g);
    case StageOp::kAttention:
      return split_attention_ ? end_at(mb, l, StageOp::kAttentionPrep, g) : layer_end(mb, l - 1, g);
    case StageOp::kRouter:
      return end_at(mb, l, StageOp::kAttention, g);
    case StageOp::kDispatch:
    case StageOp::kSharedExperts:
      return end_at(mb, l, StageOp::kRouter, g);
    case StageOp::kExperts:
      return end_at(mb, l, StageOp::kDispatch, g);
    case StageOp::kCombine:
      return end_at(mb, l, StageOp::kExperts, g);
  }
  return -1.0;
}

void Timeline::place_next_compute(int32_t g) {
  MOESIM_CHECK(next_compute_[g] < compute_items_.size(), "timeline: a dependency is never issued");
  const size_t i = compute_items_[next_compute_[g]++];
  const Item& it = items_[i];
  const double ready_s = ready(it, g);
  MOESIM_CHECK(ready_s >= 0, "timeline: an op is issued before its dependency is placed");
  const double start = std::max(compute_free_[g], ready_s);
  const double work = layers_[static_cast<size_t>(it.layer_pos)].compute(it.mb, it.op, g);
  const double full_rate_end = start + work;
  double end = full_rate_end, dur = work, lost = 0;
  if (rate_ < 1 && work > 0) {
    end = shared_end_s(start, work, rate_, comm_busy_, first_comm_[g]);
    if (end > full_rate_end) {
      dur = end - start;
      lost = end - full_rate_end;
    } else {
      end = full_rate_end;
    }
  }
  end_at(it.mb, it.layer_pos, it.op, g) = end;
  compute_free_[g] = end;
  totals_.compute_s[g] += dur;
  if (dur > 0) compute_busy_[g].emplace_back(start, end);
  if (keep_spans_) {
    span_start_[i * n_ + g] = start;
    span_dur_[i * n_ + g] = dur;
    span_lost_[i * n_ + g] = lost;
  }
}

void Timeline::place_comm(size_t i) {
  const Item& it = items_[i];
  // A collective: a barrier over the GPUs, one at a time (on every GPU alike).
  double start = comm_free_;
  for (size_t g = 0; g < n_; ++g) {
    const auto gi = static_cast<int32_t>(g);
    while (ready(it, gi) < 0) place_next_compute(gi);
    start = std::max(start, ready(it, gi));
  }
  const double dur = layers_[static_cast<size_t>(it.layer_pos)].comm(it.mb, it.op);
  for (size_t g = 0; g < n_; ++g) {
    end_at(it.mb, it.layer_pos, it.op, static_cast<int32_t>(g)) = start + dur;
    totals_.comm_s[g] += dur;
    if (keep_spans_) {
      span_start_[i * n_ + g] = start;
      span_dur_[i * n_ + g] = dur;
    }
  }
  comm_free_ = start + dur;
  any_comm_ = true;
  if (dur > 0) comm_busy_.emplace_back(start, start + dur);
}

void Timeline::run() {
  for (size_t i = 0; i < items_.size(); ++i) {
    if (is_comm_op(items_[i].op)) place_comm(i);
  }
  for (size_t g = 0; g < n_; ++g) {
    while (next_compute_[g] < compute_items_.size()) place_next_compute(static_cast<int32_t>(g));
  }
  double comm_busy_s = 0;
  for (const auto& [a, b] : comm_busy_) comm_busy_s += b - a;
  for (size_t g = 0; g < n_; ++g) {
    const auto gi = static_cast<int32_t>(g);
    double end = std::max(compute_free_[g], any_comm_ ? comm_free_ : clock_s_[g]);
    for (int32_t mb = 0; mb < num_mb_; ++mb) {
      end = std::max(end, layer_end(mb, num_layers_ - 1, gi));
    }
    double busy = 0;
    for (const auto& [a, b] : compute_busy_[g]) busy += b - a;
    busy += comm_busy_s;
    busy -= intersection_s(compute_busy_[g], comm_busy_);
    totals_.wait_s[g] += std::max(0.0, end - clock_s_[g] - busy);
    clock_s_[g] = end;
  }
}

void Timeline::append_spans(std::vector<TimelineSpan>& spans) const {
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item& it = items_[i];
    const int32_t layer_idx = layers_[static_cast<size_t>(it.layer_pos)].layer_idx;
    for (size_t g = 0; g < n_; ++g) {
      const size_t at = i * n_ + g;
      spans.push_back({static_cast<int32_t>(g), layer_idx, it.mb, it.op, span_start_[at],
                       span_dur_[at], span_lost_[at]});
    }
  }
}

}  // namespace

double SmSharing::compute_rate() const {
  if (comm_sms == 0) return 1.0;
  MOESIM_CHECK(comm_sms > 0 && comm_sms < gpu_sms, "comm_sms in [0, gpu_sms)");
  return static_cast<double>(gpu_sms - comm_sms) / static_cast<double>(gpu_sms);
}

bool is_comm_op(StageOp op) { return op == StageOp::kDispatch || op == StageOp::kCombine; }

const char* stage_op_name(StageOp op) { return kOpNames[op_idx(op)]; }

const char* stage_span_name(StageOp op, int32_t mb) {
  MOESIM_CHECK(mb == 0 || mb == 1, "two micro-batches at most");
  return kSpanNames[static_cast<size_t>(mb)][op_idx(op)];
}

bool MicrobatchSchedule::has(StageOp op) const {
  for (const auto& s : stages) {
    if (std::find(s.begin(), s.end(), op) != s.end()) return true;
  }
  return false;
}

const MicrobatchSchedule& two_microbatch_schedule() {
  static const MicrobatchSchedule s{"two_microbatch",
                                    2,
                                    {{StageOp::kAttention, StageOp::kRouter, StageOp::kDispatch},
                                     {StageOp::kExperts, StageOp::kCombine},
                                     {StageOp::kSharedExperts}},
                                    0};
  return s;
}

const MicrobatchSchedule& decode_pipeline_schedule() {
  static const MicrobatchSchedule s{"decode_pipeline",
                                    2,
                                    {{StageOp::kAttentionPrep},
                                     {StageOp::kAttention, StageOp::kRouter},
                                     {StageOp::kDispatch, StageOp::kSharedExperts},
                                     {StageOp::kExperts, StageOp::kCombine},
                                     {}},
                                    2};
  return s;
}

const MicrobatchSchedule& sequential_schedule() {
  static const MicrobatchSchedule s{"sequential",
                                    1,
                                    {{StageOp::kAttention, StageOp::kRouter, StageOp::kDispatch,
                                      StageOp::kExperts, StageOp::kCombine}},
                                    0};
  return s;
}

void LayerStageCosts::reset(int32_t layer, int32_t gpus) {
  layer_idx = layer;
  num_gpus = gpus;
  compute_s.assign(static_cast<size_t>(2 * kNumStageOps) * static_cast<size_t>(gpus), 0.0);
  comm_s.assign(static_cast<size_t>(2 * kNumStageOps), 0.0);
}

void run_microbatch_timeline(const MicrobatchSchedule& schedule,
                             std::span<const LayerStageCosts> layers, const SmSharing& sm,
                             std::vector<double>& clock_s, TimelineTotals& totals,
                             std::vector<TimelineSpan>* spans) {
  MOESIM_CHECK(totals.compute_s.size() == clock_s.size() &&
                   totals.comm_s.size() == clock_s.size() && totals.wait_s.size() == clock_s.size(),
               "timeline totals sized per GPU");
  if (layers.empty()) return;
  for (const LayerStageCosts& l : layers) {
    MOESIM_CHECK(static_cast<size_t>(l.num_gpus) == clock_s.size(), "layer costs per GPU");
  }
  Timeline timeline(schedule, layers, sm, clock_s, totals, spans != nullptr);
  timeline.run();
  if (spans) timeline.append_spans(*spans);
}

}  // namespace moesim::sim
