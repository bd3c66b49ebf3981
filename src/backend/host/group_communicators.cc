#include "backend/host/group_communicators.h"

#include "backend/host/mpi_check.h"

namespace bucketsim {

GroupCommunicators::~GroupCommunicators() {
  for (auto& [id, comm] : comms_) MPI_Comm_free(&comm);
}

Result<MPI_Comm> GroupCommunicators::Get(const ProcessGroup& group) {
  if (auto it = comms_.find(group.id); it != comms_.end()) return it->second;
  Result<int> position = GroupPosition(group, world_rank_);
  if (!position.ok()) return position.status();
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Group members = MPI_GROUP_NULL;
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  // Group ranks follow the trace's member order, so positions agree with fairscale's chunks.
  int code = MPI_Group_incl(world_group, group.size(), group.ranks.data(), &members);
  MPI_Group_free(&world_group);
  if (code != MPI_SUCCESS) return MpiStatus(code, "MPI_Group_incl");
  MPI_Comm comm = MPI_COMM_NULL;
  // Creation is sequential on every member, in trace order: one tag serves every group.
  constexpr int kCreateTag = 0x6273;
  code = MPI_Comm_create_group(MPI_COMM_WORLD, members, kCreateTag, &comm);
  MPI_Group_free(&members);
  if (code != MPI_SUCCESS) return MpiStatus(code, "MPI_Comm_create_group");
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  comms_.emplace(group.id, comm);
  return comm;
}

}  // namespace bucketsim
