#include "backend/cuda/communicator_plan.h"

#include <fmt/format.h>

#include "core/trace_header.h"

namespace bucketsim {

Result<ExecutionPlan> PlanExecution(int processes, int process_rank, const TraceHeader& header) {
  ExecutionPlan plan;
  plan.trace_rank = header.rank;
  if (processes == header.world_size) {
    if (process_rank != header.rank) {
      return InvalidTrace(fmt::format(
          "process {} was given the trace of rank {}: give each rank its own trace ('{{rank}}' "
          "in the path)",
          process_rank, header.rank));
    }
    return plan;
  }
  if (processes == 1) {
    plan.emulated = true;
    plan.note = fmt::format(
        "one process replays rank {} of a {}-rank trace: each reduce-scatter runs on an NCCL "
        "communicator of one rank and a local kernel reduces the group's rows of the same send "
        "buffer; bandwidths are those of this GPU's memory, not of a network",
        header.rank, header.world_size);
    return plan;
  }
  return InvalidArgument(fmt::format(
      "the trace describes a world of {} ranks but {} processes were started: run it with "
      "mpirun -np {}, or with a single process to emulate the collectives",
      header.world_size, processes, header.world_size));
}

Result<CommunicatorPlan> PlanCommunicator(const ProcessGroup& group, const ExecutionPlan& plan) {
  Result<int> position = GroupPosition(group, plan.trace_rank);
  if (!position.ok()) return position.status();
  CommunicatorPlan result;
  result.group = group.id;
  result.members = group.size();
  int rank_term_sum = 0;
  for (int member : group.ranks) rank_term_sum += PatternRankTerm(member);
  result.expectation = {group.size(), *position, plan.trace_rank, rank_term_sum, plan.emulated};
  if (!plan.emulated) {
    result.nccl_ranks = group.size();
    result.nccl_rank = *position;
    result.bootstrap_over_mpi = group.size() > 1;
  }
  return result;
}

}  // namespace bucketsim
