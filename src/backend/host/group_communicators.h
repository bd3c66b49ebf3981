// One MPI communicator per process-group object of the trace, created when a collective first
// uses the group (MPI_Comm_create_group: only the group's members take part). Creating them on
// first use is what lets a report count the communicators a policy needs: per-group-dedup
// reduces every bucket of a member set on one group object, so it creates fewer.
//
// Every member must reach Get() for the same groups in the same order; they do, because every
// rank replays the same trace under the same policy. A group that does not contain this
// process's rank is an error: the trace describes another rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <unordered_map>

#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

class GroupCommunicators {
 public:
  explicit GroupCommunicators(int world_rank) : world_rank_(world_rank) {}
  ~GroupCommunicators();
  GroupCommunicators(const GroupCommunicators&) = delete;
  GroupCommunicators& operator=(const GroupCommunicators&) = delete;

  Result<MPI_Comm> Get(const ProcessGroup& group);
  std::uint64_t created() const { return comms_.size(); }

 private:
  int world_rank_;
  std::unordered_map<GroupId, MPI_Comm> comms_;
};

}  // namespace bucketsim
