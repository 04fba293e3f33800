// NCCL communicator: shared-file bootstrap and the grouped send/recv all-to-all, on a
// single-rank group (one process, one GPU: the rank sends to itself). Skips without a device.
#include "engine/cuda/nccl_communicator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "engine/cuda/check.h"
#include "engine/cuda/cuda_backend.h"

namespace moesim::engine::cuda {
namespace {

TEST(NcclCommunicatorTest, SingleRankAllToAllThroughFileBootstrap) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device; NCCL test skipped";
  MOESIM_CUDA_CHECK(cudaSetDevice(0));
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("moesim_nccl_id_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed())))
          .string();
  auto comm = NcclCommunicator::create_with_file(path, 0, 1, 10.0);
  std::filesystem::remove(path);
  ASSERT_EQ(comm->world_size(), 1);
  std::vector<uint8_t> host(4096);
  std::iota(host.begin(), host.end(), 0);
  void* send = nullptr;
  void* recv = nullptr;
  MOESIM_CUDA_CHECK(cudaMalloc(&send, host.size()));
  MOESIM_CUDA_CHECK(cudaMalloc(&recv, host.size()));
  MOESIM_CUDA_CHECK(cudaMemcpy(send, host.data(), host.size(), cudaMemcpyHostToDevice));
  comm->all_to_all_bytes(send, {4096}, recv, {4096}, nullptr);
  std::vector<uint8_t> back(host.size());
  MOESIM_CUDA_CHECK(cudaMemcpy(back.data(), recv, back.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, host);
  cudaFree(send);
  cudaFree(recv);
}

TEST(NcclCommunicatorTest, WaitingRankTimesOutWithAMessage) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "moesim_nccl_id_absent").string();
  std::filesystem::remove(path);
  try {
    NcclCommunicator::create_with_file(path, 1, 2, 0.2);
    FAIL() << "expected a timeout";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moesim::engine::cuda
