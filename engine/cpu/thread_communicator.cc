// The in-process communicator group: a generation-counting barrier with an abort flag, and the
// slots where ranks publish their send buffers.
#include "engine/cpu/thread_communicator.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>

#include "base/check.h"

namespace moesim::engine::cpu {
namespace {

// What a rank publishes for one all-to-all.
struct SendSlot {
  const char* data = nullptr;
  std::vector<int64_t> bytes_per_rank;
};

class ThreadGroup {
 public:
  explicit ThreadGroup(int world_size) : world_size_(world_size), slots_(world_size) {}

  int world_size() const { return world_size_; }
  SendSlot& slot(int rank) { return slots_[rank]; }

  // Returns when every rank has arrived; throws CommunicatorAbortedError once aborted.
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) throw CommunicatorAbortedError("another rank of the in-process group failed");
    const uint64_t generation = generation_;
    if (++arrived_ == world_size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) {
      throw CommunicatorAbortedError("another rank of the in-process group failed");
    }
  }

  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }

 private:
  const int world_size_;
  std::vector<SendSlot> slots_;  // written by their rank before the first barrier of a round
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }

  void all_to_all_bytes(const void* send, const std::vector<int64_t>& send_bytes_per_rank,
                        void* recv, const std::vector<int64_t>& recv_bytes_per_rank) override {
    const int n = group_->world_size();
    MOESIM_CHECK(static_cast<int>(send_bytes_per_rank.size()) == n &&
                     static_cast<int>(recv_bytes_per_rank.size()) == n,
                 "all_to_all_bytes: one count per rank");
    SendSlot& mine = group_->slot(rank_);
    mine.data = static_cast<const char*>(send);
    mine.bytes_per_rank = send_bytes_per_rank;
    group_->arrive_and_wait();  // every send buffer is published
    char* out = static_cast<char*>(recv);
    for (int peer = 0; peer < n; ++peer) {
      const SendSlot& theirs = group_->slot(peer);
      const int64_t bytes = theirs.bytes_per_rank[rank_];
      MOESIM_CHECK(bytes == recv_bytes_per_rank[peer],
                   ("all_to_all_bytes: rank " + std::to_string(peer) + " sends " +
                    std::to_string(bytes) + " bytes to rank " + std::to_string(rank_) +
                    ", which expects " + std::to_string(recv_bytes_per_rank[peer]))
                       .c_str());
      const int64_t offset = std::accumulate(theirs.bytes_per_rank.begin(),
                                             theirs.bytes_per_rank.begin() + rank_, int64_t{0});
      if (bytes > 0) std::memcpy(out, theirs.data + offset, static_cast<size_t>(bytes));
      out += bytes;
    }
    group_->arrive_and_wait();  // every peer has finished reading this rank's send buffer
  }

  ThreadGroup& group() { return *group_; }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_thread_communicators(int world_size) {
  MOESIM_CHECK(world_size >= 1, "make_thread_communicators: world_size >= 1");
  auto group = std::make_shared<ThreadGroup>(world_size);
  std::vector<std::shared_ptr<Communicator>> communicators;
  for (int r = 0; r < world_size; ++r) {
    communicators.push_back(std::make_shared<ThreadCommunicator>(group, r));
  }
  return communicators;
}

void abort_thread_group(Communicator& communicator) {
  auto* thread_communicator = dynamic_cast<ThreadCommunicator*>(&communicator);
  MOESIM_CHECK(thread_communicator != nullptr,
               "abort_thread_group: not an in-process communicator");
  thread_communicator->group().abort();
}

}  // namespace moesim::engine::cpu
