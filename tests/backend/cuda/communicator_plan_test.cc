#include "backend/cuda/communicator_plan.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TraceHeader Header(int world_size, int rank) {
  TraceHeader header;
  header.world_size = world_size;
  header.rank = rank;
  EXPECT_TRUE(header.Finalize().ok());
  return header;
}

TEST(CommunicatorPlan, OneProcessPerTraceRankRunsForReal) {
  Result<ExecutionPlan> plan = PlanExecution(4, 2, Header(4, 2));
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->emulated);
  EXPECT_EQ(plan->trace_rank, 2);
  EXPECT_TRUE(plan->note.empty());
}

TEST(CommunicatorPlan, OneProcessEmulatesALargerWorld) {
  Result<ExecutionPlan> plan = PlanExecution(1, 0, Header(8, 3));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->emulated);
  EXPECT_EQ(plan->trace_rank, 3);
  EXPECT_NE(plan->note.find("rank 3 of a 8-rank trace"), std::string::npos);
}

TEST(CommunicatorPlan, OtherProcessCountsAreErrors) {
  Result<ExecutionPlan> plan = PlanExecution(3, 0, Header(8, 0));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("mpirun -np 8"), std::string::npos);
  Result<ExecutionPlan> wrong_trace = PlanExecution(4, 1, Header(4, 2));
  ASSERT_FALSE(wrong_trace.ok());
  EXPECT_EQ(wrong_trace.status().message(),
            "process 1 was given the trace of rank 2: give each rank its own trace ('{rank}' in "
            "the path)");
}

TEST(CommunicatorPlan, RealGroupUsesPositionAndBootstrapsOverMpi) {
  ExecutionPlan real{false, "", 5};
  ProcessGroup group{7, {1, 3, 5, 7}, "odd"};
  Result<CommunicatorPlan> plan = PlanCommunicator(group, real);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->group, 7u);
  EXPECT_EQ(plan->nccl_ranks, 4);
  EXPECT_EQ(plan->nccl_rank, 2);
  EXPECT_EQ(plan->members, 4);
  EXPECT_TRUE(plan->bootstrap_over_mpi);
  EXPECT_FALSE(plan->expectation.emulated);
  EXPECT_EQ(plan->expectation.position, 2);
  // RankTerm(r) = r % 4 + 1: ranks 1, 3, 5, 7 give 2 + 4 + 2 + 4.
  EXPECT_EQ(plan->expectation.rank_term_sum, 12);
  // Position 2 of request 10, element 4: 12 + 4 * ColumnTerm(10, 2, 4) = 12 + 4 * 3.
  EXPECT_EQ(plan->expectation.At(10, 4), 24.0f);
}

TEST(CommunicatorPlan, GroupOfOneNeedsNoBootstrap) {
  Result<CommunicatorPlan> plan = PlanCommunicator({1, {0}, ""}, ExecutionPlan{false, "", 0});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->nccl_ranks, 1);
  EXPECT_FALSE(plan->bootstrap_over_mpi);
}

TEST(CommunicatorPlan, EmulatedGroupIsAWorldOfOneThatReducesAllRows) {
  ExecutionPlan emulated{true, "note", 3};
  Result<CommunicatorPlan> plan = PlanCommunicator({2, {0, 1, 2, 3}, ""}, emulated);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->nccl_ranks, 1);
  EXPECT_EQ(plan->nccl_rank, 0);
  EXPECT_EQ(plan->members, 4);
  EXPECT_FALSE(plan->bootstrap_over_mpi);
  EXPECT_TRUE(plan->expectation.emulated);
  // Rank 3 reduces its own 4 rows: 4 * RankTerm(3) + sum over rows of ColumnTerm(0, row, 0).
  // ColumnTerm(0, row, 0) = (7 * row) % 5 = 0, 2, 4, 1.
  EXPECT_EQ(plan->expectation.At(0, 0), 4.0f * 4 + 7);
}

TEST(CommunicatorPlan, GroupWithoutThisRankIsAnError) {
  Result<CommunicatorPlan> plan = PlanCommunicator({9, {0, 1}, ""}, ExecutionPlan{false, "", 2});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidTrace);
  EXPECT_NE(plan.status().message().find("process group 9"), std::string::npos);
}

}  // namespace
}  // namespace bucketsim
