#include "sim/serving/kv_tier_traffic.h"

#include <algorithm>

#include "base/check.h"

namespace moesim::sim {

KvTierTraffic::KvTierTraffic(KvTiers& tiers, Simulation& sim, EventKind load_ready,
                             RunRecorder& recorder, IdWindow<Seq>& seqs,
                             const std::vector<int32_t>& traced)
    : tiers_(tiers),
      sim_(sim),
      load_ready_(load_ready),
      recorder_(recorder),
      seqs_(seqs),
      traced_(traced) {}

void KvTierTraffic::track_loads(const Replica& r) {
  for (const KvLoadStarted& l : r.scheduler->loads_started()) {
    loads_[l.load_id] = LoadInFlight{r.idx, l};
    sim_.schedule_at(std::max(l.ready_ns, sim_.now()), load_ready_, r.idx, l.load_id);
  }
}

bool KvTierTraffic::on_load_ready(const Event& e, const Replica& r) {
  auto it = loads_.find(e.id1);
  MOESIM_CHECK(it != loads_.end(), "a KV load ready event without its load");
  const KvLoadStarted& l = it->second.load;
  if (l.ready_ns > sim_.now()) return false;  // contention moved it: a later event fires
  if (recorder_.traces_step(l.start_ns) &&
      (traced_.empty() || std::find(traced_.begin(), traced_.end(), r.idx) != traced_.end())) {
    recorder_.trace()->push_back(TraceSlice{r.idx, r.gpus()[l.rank * r.tp()].value, "kv_load", -1,
                                            l.start_ns, l.ready_ns - l.start_ns});
  }
  loads_.erase(it);
  return true;
}

std::pair<std::span<const double>, std::span<const double>> KvTierTraffic::slowdown(
    const Replica& r) {
  const size_t n = r.gpus().size();
  const SimTime t0 = sim_.now();
  const SimTime t1 = t0 + std::max<SimTime>(r.last_step_ns, 1);
  in_slow_.assign(n, 1.0);
  out_slow_.assign(n, 1.0);
  int64_t slowed = 0;
  for (size_t i = 0; i < n; ++i) {
    const HostPathShare share = tiers_.busy_share(r.gpus()[i].value, t0, t1);
    if (!share.any()) continue;
    in_slow_[i] = tiers_.nic_in_slowdown(share);
    out_slow_[i] = tiers_.nic_out_slowdown(share);
    if (in_slow_[i] > 1.0 || out_slow_[i] > 1.0) slowed++;
  }
  tiers_.counters().slowed_gpu_steps += slowed;
  if (slowed == 0) {
    in_slow_.clear();
    out_slow_.clear();
  }
  return {in_slow_, out_slow_};
}

void KvTierTraffic::after_step(const Replica& r, const StepResult& res) {
  if (res.duration_ns <= 0 || res.nic_in_bytes.empty()) return;
  const SimTime t0 = sim_.now();
  moved_.clear();
  for (size_t i = 0; i < r.gpus().size(); ++i) {
    tiers_.contend(r.gpus()[i].value, t0, t0 + res.duration_ns, res.nic_in_bytes[i],
                   res.nic_out_bytes[i], &moved_);
  }
  for (const auto& [id, ready] : moved_) {
    auto it = loads_.find(id);
    if (it == loads_.end() || ready <= it->second.load.ready_ns) continue;
    KvLoadStarted& l = it->second.load;
    const int64_t sid = l.sid;
    if (sid >= seqs_.front_id()) {
      Seq& s = seqs_[sid];
      if (s.kv_load_id == id) {
        s.kv_load_ns += ready - s.kv_ready_ns;
        s.kv_ready_ns = ready;
      }
    }
    l.ready_ns = ready;
    sim_.schedule_at(ready, load_ready_, it->second.replica, id);
  }
}

}  // namespace moesim::sim
