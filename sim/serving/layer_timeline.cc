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

}  // namespace

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
                             std::span<const LayerStageCosts> layers, std::vector<double>& clock_s,
                             TimelineTotals& totals, std::vector<TimelineSpan>* spans) {
  const auto n = static_cast<int32_t>(clock_s.size());
  const auto num_layers = static_cast<int32_t>(layers.size());
  const int32_t num_mb = schedule.num_microbatches;
  MOESIM_CHECK(num_mb == 1 || num_mb == 2, "one or two micro-batches");
  MOESIM_CHECK(totals.compute_s.size() == clock_s.size() &&
                   totals.comm_s.size() == clock_s.size() && totals.wait_s.size() == clock_s.size(),
               "timeline totals sized per GPU");
  if (num_layers == 0) return;
  for (const LayerStageCosts& l : layers) MOESIM_CHECK(l.num_gpus == n, "layer costs per GPU");

  // Each micro-batch's stage sequence over the layers: a layer's last stage joins the next
  // layer's first (the layers' op lists are concatenated between yield points).
  std::vector<std::vector<StageItem>> stages;
  for (int32_t l = 0; l < num_layers; ++l) {
    for (size_t s = 0; s < schedule.stages.size(); ++s) {
      if (s > 0 || l == 0) stages.emplace_back();
      for (StageOp op : schedule.stages[s]) stages.back().push_back({l, op});
    }
  }
  // Issue order: micro-batch 0 runs delta_stages stages, then the two alternate stage by stage.
  std::vector<std::pair<int32_t, size_t>> order;  // (micro-batch, stage)
  const size_t num_stages = stages.size();
  if (num_mb == 1) {
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

  // end_s[((mb * num_layers + l) * kNumStageOps + op) * n + g]: when the op ended (-1: not run).
  const auto sn = static_cast<size_t>(n);
  std::vector<double> end_s(static_cast<size_t>(num_mb * num_layers * kNumStageOps) * sn, -1.0);
  auto end_at = [&](int32_t mb, int32_t l, StageOp op, int32_t g) -> double& {
    return end_s[((static_cast<size_t>(mb) * num_layers + l) * kNumStageOps + op_idx(op)) * sn + g];
  };
  const bool split_attention = schedule.has(StageOp::kAttentionPrep);
  const bool has_shared = schedule.has(StageOp::kSharedExperts);
  // When micro-batch mb has finished layer l on GPU g (l = -1: the start clock).
  auto layer_end = [&](int32_t mb, int32_t l, int32_t g) {
    if (l < 0) return clock_s[g];
    double e = end_at(mb, l, StageOp::kCombine, g);
    if (has_shared) e = std::max(e, end_at(mb, l, StageOp::kSharedExperts, g));
    return e;
  };
  auto ready = [&](int32_t mb, int32_t l, StageOp op, int32_t g) {
    switch (op) {
      case StageOp::kAttentionPrep:
        return layer_end(mb, l - 1, g);
      case StageOp::kAttention:
        return split_attention ? end_at(mb, l, StageOp::kAttentionPrep, g)
                               : layer_end(mb, l - 1, g);
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
    return 0.0;
  };

  std::vector<double> compute_free(clock_s), comm_free(clock_s);
  std::vector<std::vector<std::pair<double, double>>> busy_compute(sn), busy_comm(sn);
  for (const auto& [mb, s] : order) {
    for (const StageItem& item : stages[s]) {
      const LayerStageCosts& c = layers[static_cast<size_t>(item.layer_pos)];
      if (is_comm_op(item.op)) {
        // A collective: a barrier over the GPUs, one at a time on each.
        double start = 0;
        for (int32_t g = 0; g < n; ++g) {
          start = std::max({start, comm_free[g], ready(mb, item.layer_pos, item.op, g)});
        }
        const double dur = c.comm(mb, item.op);
        for (int32_t g = 0; g < n; ++g) {
          end_at(mb, item.layer_pos, item.op, g) = start + dur;
          comm_free[g] = start + dur;
          totals.comm_s[g] += dur;
          if (dur > 0) busy_comm[g].emplace_back(start, start + dur);
          if (spans) spans->push_back({g, c.layer_idx, mb, item.op, start, dur});
        }
        continue;
      }
      for (int32_t g = 0; g < n; ++g) {
        const double start = std::max(compute_free[g], ready(mb, item.layer_pos, item.op, g));
        const double dur = c.compute(mb, item.op, g);
        end_at(mb, item.layer_pos, item.op, g) = start + dur;
        compute_free[g] = start + dur;
        totals.compute_s[g] += dur;
        if (dur > 0) busy_compute[g].emplace_back(start, start + dur);
        if (spans) spans->push_back({g, c.layer_idx, mb, item.op, start, dur});
      }
    }
  }
  for (int32_t g = 0; g < n; ++g) {
    double end = std::max(compute_free[g], comm_free[g]);
    for (int32_t mb = 0; mb < num_mb; ++mb) end = std::max(end, layer_end(mb, num_layers - 1, g));
    double busy = 0;
    for (const auto& [a, b] : busy_compute[g]) busy += b - a;
    for (const auto& [a, b] : busy_comm[g]) busy += b - a;
    busy -= intersection_s(busy_compute[g], busy_comm[g]);
    totals.wait_s[g] += std::max(0.0, end - clock_s[g] - busy);
    clock_s[g] = end;
  }
}

}  // namespace moesim::sim
