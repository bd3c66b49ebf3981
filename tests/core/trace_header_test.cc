#include "core/trace_header.h"

#include <limits>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TraceHeader Valid() {
  TraceHeader h;
  h.world_size = 4;
  h.rank = 1;
  h.streams = {{"default"}, {"all_gather"}, {"post_backward"}};
  h.groups = {{7, {0, 1, 2, 3}, "world"}, {8, {1, 0}, "pair"}};
  h.units = {{"a", {{"w", 10, DType::kFloat32}, {"b", 4, DType::kFloat32}}},
             {"b", {{"w", 6, DType::kBFloat16}}}};
  return h;
}

void ExpectInvalid(TraceHeader h, const std::string& fragment) {
  Status status = h.Finalize();
  ASSERT_FALSE(status.ok()) << fragment;
  EXPECT_EQ(status.code(), StatusCode::kInvalidTrace);
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(TraceHeader, FinalizeBuildsTheIndexes) {
  TraceHeader h = Valid();
  ASSERT_TRUE(h.Finalize().ok());
  EXPECT_EQ(h.post_backward_stream(), 2u);
  EXPECT_EQ(h.num_params(), 3u);
  EXPECT_EQ(h.ParamIndex(1, 0), 2u);
  ASSERT_NE(h.FindGroup(8), nullptr);
  EXPECT_EQ(h.FindGroup(8)->size(), 2);
  EXPECT_EQ(h.FindGroup(9), nullptr);
  EXPECT_EQ(h.Intern("after fwd"), h.Intern("after fwd"));
  EXPECT_EQ(h.names[h.Intern("x")], "x");
}

// Intern guesses the name that followed the previous one last time: whether the guess is right
// (the same order every iteration), wrong (another order, a name skipped, a new name in between)
// or stale (names changed behind it), every name keeps the index it was first given.
TEST(TraceHeader, InternGivesEachNameOneIndexWhateverTheOrder) {
  TraceHeader h;
  const std::vector<std::string> iteration = {"fwd.0", "fwd.1", "bwd.1", "bwd.0"};
  std::vector<std::uint32_t> first;
  for (const std::string& name : iteration) first.push_back(h.Intern(name));
  EXPECT_EQ(first, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  for (int again = 0; again < 2; ++again) {
    for (std::size_t i = 0; i < iteration.size(); ++i) EXPECT_EQ(h.Intern(iteration[i]), first[i]);
  }
  EXPECT_EQ(h.Intern("bwd.0"), 3u);  // after bwd.0 came fwd.0 last time
  EXPECT_EQ(h.Intern("fwd.1"), 1u);
  EXPECT_EQ(h.Intern("new"), 4u);
  EXPECT_EQ(h.Intern("bwd.1"), 2u);
  EXPECT_EQ(h.Intern("bwd.0"), 3u);
  EXPECT_EQ(h.Intern("fwd.0"), 0u);
  h.names.resize(2);  // a worker's copy keeps its own names (replay_policies.cc): guesses past
                      // the end are not taken
  EXPECT_EQ(h.Intern("fwd.1"), 1u);
  EXPECT_EQ(h.names.size(), 2u);
  EXPECT_EQ(h.names[h.Intern("fwd.0")], "fwd.0");
}

TEST(TraceHeader, WithoutAPostBackwardStreamPoliciesUseStreamZero) {
  TraceHeader h = Valid();
  h.streams = {};
  ASSERT_TRUE(h.Finalize().ok());
  EXPECT_EQ(h.streams.size(), 1u);
  EXPECT_EQ(h.post_backward_stream(), 0u);
}

// fairscale and FSDP1 reduce on the stream they allocate their buckets on; FSDP2 allocates the
// reduce-scatter input on the current stream and reduces on reduce_scatter_stream.
TEST(TraceHeader, ThePoliciesCollectivesRunOnTheReduceScatterStreamWhereThereIsOne) {
  TraceHeader fairscale = Valid();
  fairscale.streams = {{"default"}, {"all_gather"}, {"post_backward"}};
  ASSERT_TRUE(fairscale.Finalize().ok());
  EXPECT_EQ(fairscale.post_backward_stream(), 2u);
  EXPECT_EQ(fairscale.collective_stream(), 2u);
  TraceHeader fsdp2 = Valid();
  fsdp2.streams = {{"default"}, {"all_gather_copy_in"}, {"all_gather"}, {"reduce_scatter"}};
  ASSERT_TRUE(fsdp2.Finalize().ok());
  EXPECT_EQ(fsdp2.post_backward_stream(), 0u);
  EXPECT_EQ(fsdp2.collective_stream(), 3u);
}

TEST(TraceHeader, RejectsInconsistentHeaders) {
  TraceHeader h = Valid();
  h.schema_version = 7;
  ExpectInvalid(h, "schema_version 7 is not supported (this build reads 1 to 6)");
  h = Valid();
  h.schema_version = 5;
  h.replicate_group = 77;
  ExpectInvalid(h, "replicate_group 77 is not declared in 'groups'");
  h = Valid();
  h.world_size = 0;
  ExpectInvalid(h, "world_size 0 is outside");
  h = Valid();
  h.rank = 4;
  ExpectInvalid(h, "rank 4 is outside world_size 4");
  h = Valid();
  h.groups[0].ranks = {0, 1, 2, 3, 4};
  ExpectInvalid(h, "group 7: 5 members but world_size is 4");
  h = Valid();
  h.groups[1].ranks = {1, 5};
  ExpectInvalid(h, "group 8: rank 5 is outside world_size 4");
  h = Valid();
  h.groups[1].ranks = {1, 1};
  ExpectInvalid(h, "group 8: rank 1 is listed twice");
  h = Valid();
  h.groups[1].ranks = {0, 2};
  ExpectInvalid(h, "group 8: does not contain this trace's rank 1");
  h = Valid();
  h.groups[1].ranks = {};
  ExpectInvalid(h, "group 8: no member ranks");
  h = Valid();
  h.groups[1].id = 7;
  ExpectInvalid(h, "group id 7 is defined twice");
  h = Valid();
  h.units[1].params[0].numel = 0;
  ExpectInvalid(h, "fsdp 1 ('b') param 0: numel 0 is out of range");
  h = Valid();
  h.units[0].params[0].numel = Numel{1} << 62;  // * 4 bytes would wrap a 64-bit product
  ExpectInvalid(h, "fsdp 0 ('a') param 0");
  h = Valid();
  h.bucket_cap_mb = std::numeric_limits<double>::infinity();
  ExpectInvalid(h, "bucket_cap_mb is not a finite number");
}

}  // namespace
}  // namespace bucketsim
