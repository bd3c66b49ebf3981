#include "backend/host/group_broadcast.h"

#include <mpi.h>

#include <limits>

#include <fmt/format.h>

#include "backend/host/group_communicators.h"
#include "backend/host/mpi_check.h"

namespace bucketsim {

struct GroupBroadcast::Communicators {
  explicit Communicators(int world_rank) : groups(world_rank) {}
  GroupCommunicators groups;
};

GroupBroadcast::GroupBroadcast(int world_rank)
    : communicators_(std::make_unique<Communicators>(world_rank)) {}

GroupBroadcast::~GroupBroadcast() = default;

Status GroupBroadcast::FromFirst(const ProcessGroup& group, void* data, std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument(fmt::format("{} bytes to broadcast: more than MPI_Bcast can", bytes));
  }
  Result<MPI_Comm> comm = communicators_->groups.Get(group);
  if (!comm.ok()) return comm.status();
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, *comm));
  return Status::Ok();
}

}  // namespace bucketsim
