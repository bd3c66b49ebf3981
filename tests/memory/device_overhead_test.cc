// The device memory outside the caching allocator (memory/device_overhead.h): the estimate in
// exact bytes, and the capacity left to the allocator.
#include "memory/device_overhead.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

// NCCL's per-connection buffers: Simple 4 MiB + LL 524288 B + LL128 4915200 B.
constexpr Bytes kPerConnection = 9633792;

TraceHeader HeaderWithGroups(std::vector<std::vector<int>> groups) {
  TraceHeader header;
  GroupId id = 1;
  for (std::vector<int>& ranks : groups) {
    header.groups.push_back(ProcessGroup{id++, std::move(ranks), ""});
  }
  return header;
}

TEST(NcclBuffers, ProtocolBuffersAreNcclsDefaults) {
  EXPECT_EQ(kNcclSimpleBufferBytes, 4194304u);
  EXPECT_EQ(kNcclLlBufferBytes, 524288u);
  EXPECT_EQ(kNcclLl128BufferBytes, 4915200u);
  EXPECT_EQ(kNcclSimpleBufferBytes + kNcclLlBufferBytes + kNcclLl128BufferBytes, kPerConnection);
}

// A ring receives from one peer; at 3 ranks or more the tree adds the other neighbour; a pair's
// ring and tree peer is the same rank; a rank alone has no connection.
TEST(NcclBuffers, ChannelsTimesReceivePeersTimesTheProtocolBuffers) {
  EXPECT_EQ(NcclBufferBytes(1), 0u);
  EXPECT_EQ(NcclBufferBytes(2), 32 * 1 * kPerConnection);  // 308281344 B = 294 MiB
  EXPECT_EQ(NcclBufferBytes(2), 308281344u);
  EXPECT_EQ(NcclBufferBytes(3), 32 * 2 * kPerConnection);  // 616562688 B = 588 MiB
  EXPECT_EQ(NcclBufferBytes(8), 616562688u);
  EXPECT_EQ(NcclBufferBytes(1024), NcclBufferBytes(8));  // "regardless of the scale"
}

TEST(DeviceOverhead, ContextPlusOneCommunicatorPerGroupObject) {
  // Two group objects with the same members are two communicators (tiny-ws2.json's groups).
  DeviceOverhead pair = EstimateDeviceOverhead(HeaderWithGroups({{0, 1}, {0, 1}}));
  EXPECT_EQ(pair.cuda_context_bytes, 536870912u);
  EXPECT_EQ(pair.nccl_communicators, 2);
  EXPECT_EQ(pair.nccl_buffer_bytes, 616562688u);
  EXPECT_EQ(pair.total_bytes(), 1153433600u);
  EXPECT_FALSE(pair.given_bytes);

  // World size 8 with an HSDP-like layout: one 8-rank group, two 4-rank groups, one 1-rank
  // group (no peers: no buffers, not counted).
  DeviceOverhead mixed = EstimateDeviceOverhead(
      HeaderWithGroups({{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3}, {0, 2, 4, 6}, {0}}));
  EXPECT_EQ(mixed.nccl_communicators, 3);
  EXPECT_EQ(mixed.nccl_buffer_bytes, 3 * 616562688u);
  EXPECT_EQ(mixed.total_bytes(), 536870912u + 3 * 616562688u);

  // No groups (an imported snapshot): the context alone.
  EXPECT_EQ(EstimateDeviceOverhead(TraceHeader()).total_bytes(), kCudaContextBytes);
}

TEST(DeviceBudget, TheAllocatorGetsTheDeviceLessTheOverhead) {
  const TraceHeader header = HeaderWithGroups({{0, 1}, {0, 1}});
  Result<DeviceBudget> budget = DeviceBudgetFor(80 * kGiB, std::nullopt, header);
  ASSERT_TRUE(budget.ok()) << budget.status().message();
  EXPECT_EQ(budget->device_memory_bytes, 80 * kGiB);
  EXPECT_EQ(budget->allocator_capacity_bytes, 80 * kGiB - 1153433600u);
  // One byte above the overhead leaves the allocator one byte.
  Result<DeviceBudget> tight = DeviceBudgetFor(1153433601u, std::nullopt, header);
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->allocator_capacity_bytes, 1u);
}

TEST(DeviceBudget, AGivenOverheadReplacesTheEstimate) {
  const TraceHeader header = HeaderWithGroups({{0, 1}});
  Result<DeviceBudget> zero = DeviceBudgetFor(8 * kMiB, Bytes{0}, header);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->allocator_capacity_bytes, 8 * kMiB);  // the accounting before the overhead
  EXPECT_EQ(zero->overhead.nccl_communicators, 0);
  Result<DeviceBudget> measured = DeviceBudgetFor(80 * kGiB, 3 * kGiB / 2, header);
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ(measured->overhead.total_bytes(), 3 * kGiB / 2);
  EXPECT_EQ(measured->allocator_capacity_bytes, 80 * kGiB - 3 * kGiB / 2);
  EXPECT_EQ(DescribeDeviceOverhead(measured->overhead), "1.50 GiB (--device-overhead)");
}

// Fails closed: an overhead the device cannot hold is an error, never a negative or zero
// capacity.
TEST(DeviceBudget, AnOverheadAsLargeAsTheDeviceIsAnError) {
  const TraceHeader header = HeaderWithGroups({{0, 1}, {0, 1}});
  Result<DeviceBudget> equal = DeviceBudgetFor(1153433600u, std::nullopt, header);
  ASSERT_FALSE(equal.ok());
  EXPECT_EQ(equal.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(equal.status().message().find("leaves nothing to the caching allocator"),
            std::string::npos);
  EXPECT_FALSE(DeviceBudgetFor(4 * kMiB, 5 * kMiB, header).ok());
  EXPECT_FALSE(DeviceBudgetFor(0, Bytes{0}, header).ok());
}

TEST(DeviceOverhead, DescribedWithItsTerms) {
  EXPECT_EQ(DescribeDeviceOverhead(EstimateDeviceOverhead(HeaderWithGroups({{0, 1, 2}}))),
            "1.07 GiB (CUDA context 512.00 MiB + NCCL buffers 588.00 MiB for 1 communicator)");
}

}  // namespace
}  // namespace bucketsim
