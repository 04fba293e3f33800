// The in-process communicator group: skewed all-to-alls deliver every byte where a direct
// computation says, repeatedly; a failing rank wakes the others instead of hanging them; the CPU
// backend exchanges rows through it.
#include "engine/cpu/thread_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/backend.h"

namespace moesim::engine::cpu {
namespace {

// Bytes rank `src` sends to rank `dst` in round `round` (zero for some pairs, self included).
int64_t pair_bytes(int src, int dst, int round) { return (src * 7 + dst * 3 + round) % 5 * 3; }
// The value of byte i of what src sends dst.
char pair_byte(int src, int dst, int round, int64_t i) {
  return static_cast<char>(src * 31 + dst * 17 + round * 5 + i);
}

TEST(ThreadCommunicator, SkewedAllToAllDeliversEveryByte) {
  constexpr int kRanks = 3;
  constexpr int kRounds = 4;
  const auto comms = make_thread_communicators(kRanks);
  ASSERT_EQ(comms.size(), 3u);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = *comms[r];
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.world_size(), kRanks);
      for (int round = 0; round < kRounds; ++round) {
        std::vector<int64_t> send_bytes(kRanks), recv_bytes(kRanks);
        std::vector<char> send;
        for (int d = 0; d < kRanks; ++d) {
          send_bytes[d] = pair_bytes(r, d, round);
          for (int64_t i = 0; i < send_bytes[d]; ++i) send.push_back(pair_byte(r, d, round, i));
        }
        std::vector<char> expected;
        for (int s = 0; s < kRanks; ++s) {
          recv_bytes[s] = pair_bytes(s, r, round);
          for (int64_t i = 0; i < recv_bytes[s]; ++i) expected.push_back(pair_byte(s, r, round, i));
        }
        std::vector<char> recv(expected.size() + 1, '?');
        c.all_to_all_bytes(send.data(), send_bytes, recv.data(), recv_bytes);
        recv.pop_back();
        if (recv != expected) ++mismatches;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ThreadCommunicator, AbortWakesRanksWaitingInACollective) {
  const auto comms = make_thread_communicators(3);
  std::atomic<int> aborted{0};
  std::vector<std::thread> waiting;
  for (int r = 1; r < 3; ++r) {
    waiting.emplace_back([&, r] {
      const std::vector<int64_t> zero(3, 0);
      try {
        comms[r]->all_to_all_bytes(nullptr, zero, nullptr, zero);
      } catch (const CommunicatorAbortedError&) {
        ++aborted;
      }
    });
  }
  // Rank 0 fails instead of joining the collective.
  abort_thread_group(*comms[0]);
  for (std::thread& t : waiting) t.join();
  EXPECT_EQ(aborted.load(), 2);
  // Later collectives fail at once.
  const std::vector<int64_t> zero(3, 0);
  EXPECT_THROW(comms[0]->all_to_all_bytes(nullptr, zero, nullptr, zero), CommunicatorAbortedError);
}

TEST(ThreadCommunicator, CpuBackendsExchangeRowsThroughTheGroup) {
  const auto comms = make_thread_communicators(2);
  std::vector<std::vector<float>> received(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Backend> backend = make_backend("cpu");
      DistributedConfig config;
      config.rank = r;
      config.world_size = 2;
      config.communicator = comms[r];
      backend->init_distributed(config);
      EXPECT_EQ(backend->world_size(), 2);
      EXPECT_EQ(backend->rank(), r);
      // Rank r sends rows valued 10 r + row: 1 row to itself and 2 to the peer (rank 0), or
      // 1 to rank 0 and none to itself (rank 1).
      const std::vector<int64_t> send_rows =
          r == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, 0};
      const std::vector<int64_t> recv_rows =
          r == 0 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{2, 0};
      std::vector<float> values;
      for (int row = 0; row < 3; ++row) {
        for (int col = 0; col < 4; ++col) values.push_back(10.0f * r + row);
      }
      DeviceTensor send = upload_floats(*backend, values, DType::kBF16, {3, 4}, "send");
      DeviceTensor recv = backend->allocate(DType::kBF16, {2, 4}, "recv");
      ASSERT_TRUE(backend->all_to_all(send.view, send_rows, recv.view, recv_rows));
      received[r] = download_floats(*backend, recv.view);
    });
  }
  for (std::thread& t : threads) t.join();
  // Rank 0: its own row 0, then rank 1's row 0. Rank 1: rank 0's rows 1 and 2.
  EXPECT_EQ(received[0], std::vector<float>({0, 0, 0, 0, 10, 10, 10, 10}));
  EXPECT_EQ(received[1], std::vector<float>({1, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(ThreadCommunicator, CpuBackendRefusesSeveralRanksWithoutACommunicator) {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  DistributedConfig config;
  config.rank = 0;
  config.world_size = 2;
  EXPECT_THROW(backend->init_distributed(config), BackendUnavailableError);
  EXPECT_EQ(backend->world_size(), 1);
  EXPECT_FALSE(backend->all_to_all(Tensor{}, {0}, Tensor{}, {0}));
}

}  // namespace
}  // namespace moesim::engine::cpu
