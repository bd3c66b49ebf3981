// How the cuda backend sets up a reduce-scatter's communicator for a process group of the
// trace, decided before any CUDA or NCCL call so the decision is tested without a GPU.
//
// Real execution: one MPI process per trace rank (process rank == trace rank), one NCCL
// communicator per group object, of the group's size, bootstrapped over the group's MPI
// communicator (the group's position 0 calls ncclGetUniqueId and broadcasts it, as nccl-tests
// does). Emulated execution: a single process replays a trace of a larger world (one GPU, a
// trace of 8 ranks): each group object gets an NCCL communicator of one rank, and a local kernel
// reduces the group-size rows of the send buffer, so the same bytes are read and reduced; the
// report labels it emulated. Anything else (3 processes for a trace of 8) is an error.
#pragma once

#include <string>

#include "backend/verify_pattern.h"
#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

struct ExecutionPlan {
  bool emulated = false;
  std::string note;  // why, when emulated
  int trace_rank = 0;
};

Result<ExecutionPlan> PlanExecution(int processes, int process_rank, const TraceHeader& header);

struct CommunicatorPlan {
  GroupId group = 0;
  int nccl_ranks = 1;               // ranks of the NCCL communicator
  int nccl_rank = 0;                // this process's rank in it
  int members = 1;                  // the trace group's size (the rows of every send buffer)
  bool bootstrap_over_mpi = false;  // the id is broadcast over the group's MPI communicator
  PatternExpectation expectation;   // what each reduced element must be
};

// The plan of `group` for this process; an error when the group does not contain the trace's
// rank (the message of GroupPosition).
Result<CommunicatorPlan> PlanCommunicator(const ProcessGroup& group, const ExecutionPlan& plan);

}  // namespace bucketsim
