// Backend error types: an allocation that does not fit is reported with what it was for, the
// bytes requested and the bytes available (the CUDA backend throws the same error from
// cudaMalloc / cudaMallocAsync failures, with cudaMemGetInfo's free bytes), and the backend stays
// usable afterwards.
#include "engine/backend.h"

#include <gtest/gtest.h>

#include <string>

namespace moesim::engine {
namespace {

TEST(OutOfMemoryError, NamesTheTensorTheBytesRequestedAndAvailable) {
  const OutOfMemoryError e("KV cache", 3 * (int64_t{1} << 33), 1024);
  EXPECT_STREQ(e.what(),
               "out of device memory for KV cache: requested 25769803776 bytes, available 1024 "
               "bytes");
  EXPECT_EQ(e.requested_bytes(), 3 * (int64_t{1} << 33));
  EXPECT_EQ(e.available_bytes(), 1024);
}

TEST(OutOfMemoryError, CpuAllocationBeyondTheLimitThrowsAndLeavesTheBackendUsable) {
  BackendOptions options;
  options.memory_limit_bytes = 1000;
  std::unique_ptr<Backend> backend = make_backend("cpu", options);
  DeviceTensor kept = backend->allocate(DType::kBF16, {100}, "kept");  // 200 bytes
  try {
    backend->allocate(DType::kF32, {1000}, "expert weights");
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_STREQ(e.what(),
                 "out of device memory for expert weights: requested 4000 bytes, available 800 "
                 "bytes");
  }
  EXPECT_EQ(backend->memory_info().available_bytes, 800);
  DeviceTensor fits = backend->allocate(DType::kF32, {200}, "fits");
  EXPECT_EQ(backend->memory_info().available_bytes, 0);
}

}  // namespace
}  // namespace moesim::engine
