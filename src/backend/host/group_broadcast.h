// Bytes from a process group's first member to its others, over one MPI communicator per group
// object (GroupCommunicators, made when a group is first asked for): how the cuda backend's NCCL
// communicators get their unique id (nccl-tests' bootstrap). In a build without MPI a job is
// one process, so only a group of one member can be asked for (nothing to send).
#pragma once

#include <cstddef>
#include <memory>

#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

class GroupBroadcast {
 public:
  explicit GroupBroadcast(int world_rank);
  ~GroupBroadcast();
  GroupBroadcast(const GroupBroadcast&) = delete;
  GroupBroadcast& operator=(const GroupBroadcast&) = delete;

  // Collective over `group`'s members: the first member's `bytes` at `data`, on every member.
  Status FromFirst(const ProcessGroup& group, void* data, std::size_t bytes);

 private:
  struct Communicators;
  std::unique_ptr<Communicators> communicators_;
};

}  // namespace bucketsim
