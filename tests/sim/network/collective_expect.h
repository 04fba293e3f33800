// Shared by the network and collective-study tests: two collective results equal field by field.
#pragma once

#include <gtest/gtest.h>

#include "sim/network/network_model.h"

namespace moesim::sim::testing {

inline void expect_identical(const CollectiveResult& a, const CollectiveResult& b) {
  EXPECT_EQ(a.duration_ns, b.duration_ns);
  EXPECT_EQ(a.send_done_ns, b.send_done_ns);
  EXPECT_EQ(a.recv_done_ns, b.recv_done_ns);
  EXPECT_EQ(a.barrier_wait_ns, b.barrier_wait_ns);
  EXPECT_EQ(a.num_flows, b.num_flows);
  EXPECT_EQ(a.bottleneck_link, b.bottleneck_link);
  EXPECT_EQ(a.bottleneck_bytes, b.bottleneck_bytes);
}

}  // namespace moesim::sim::testing
