// Where final request records wait for older ones. The request sinks take records in arrival
// order, but a request rejected on arrival is final at once while older requests may still run
// for minutes: under overload nearly every arrival is such a record. The cluster keeps none of
// them (they never enter its window of sequences); it pushes them here, in arrival order, and
// pops them when every older record has gone to the sinks. A spool is a first-in first-out
// queue: in memory (MemoryRecordSpool, for tests and callers that keep every record anyway) or
// in an unnamed file (sim/output/file_record_spool.h), so that memory stays flat whatever the
// arrival rate (docs/reliability.md, "Memory and overload").
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

#include "sim/metrics/run_metrics.h"

namespace moesim::sim {

class RecordSpool {
 public:
  virtual ~RecordSpool() = default;
  // Appends `record`, the record of arrival `arrival_idx`; indices increase from push to push.
  virtual void push(int64_t arrival_idx, const RequestRecord& record) = 0;
  virtual bool empty() const = 0;
  // The arrival index of the oldest record. Precondition: !empty().
  virtual int64_t front_idx() const = 0;
  // Removes the oldest record and returns it. Precondition: !empty().
  virtual RequestRecord pop() = 0;
};

// A spool in memory: it grows with the records waiting in it.
class MemoryRecordSpool final : public RecordSpool {
 public:
  void push(int64_t arrival_idx, const RequestRecord& record) override {
    records_.emplace_back(arrival_idx, record);
  }
  bool empty() const override { return records_.empty(); }
  int64_t front_idx() const override { return records_.front().first; }
  RequestRecord pop() override {
    RequestRecord r = std::move(records_.front().second);
    records_.pop_front();
    return r;
  }

 private:
  std::deque<std::pair<int64_t, RequestRecord>> records_;
};

}  // namespace moesim::sim
