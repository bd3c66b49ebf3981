// A build without MPI (-DBUCKETSIM_MPI=OFF): for a GPU machine that has no MPI headers or
// library (the lent device machines: tools/device-check.sh). The job is this one process, so
// every collective of the world is the identity, there are no peers to watch, and a group to
// bootstrap has one member; the host backend, whose collectives are MPI's, is not compiled and
// says so. The cuda backend runs a trace's world on one GPU (one rank, or emulating them all).
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "backend/availability.h"
#include "backend/host/bare_collective.h"
#include "backend/host/group_broadcast.h"
#include "backend/host/host_backend.h"
#include "backend/host/mpi_world.h"

namespace bucketsim {
namespace {

constexpr const char* kWithoutMpi =
    "this bucketsim was built without MPI (-DBUCKETSIM_MPI=OFF): one process, no host backend; "
    "rebuild with MPI (the default) to run the host backend or several ranks";

}  // namespace

Result<std::unique_ptr<MpiWorld>> MpiWorld::Init() {
  return std::unique_ptr<MpiWorld>(new MpiWorld(/*rank=*/0, /*size=*/1, /*owns=*/false));
}

MpiWorld::MpiWorld(int rank, int size, bool owns) : rank_(rank), size_(size), owns_(owns) {}

MpiWorld::~MpiWorld() = default;

// The message the MPI world's Agree gives: the failing rank named, here always 0.
Status MpiWorld::Agree(const Status& local) {
  if (local.ok()) return local;
  return Status(local.code(), fmt::format("rank 0: {}", local.message()));
}

Status MpiWorld::Barrier() { return Status::Ok(); }

Result<std::vector<std::string>> MpiWorld::GatherToRoot(std::string_view local) {
  return std::vector<std::string>{std::string(local)};
}

Result<double> MpiWorld::MaxOverRanks(double mine) { return mine; }

Status MpiWorld::Broadcast(void* /*data*/, std::size_t /*bytes*/) { return Status::Ok(); }

Result<NodePlace> MpiWorld::NodeLocal() { return NodePlace{}; }

void MpiWorld::Abort(int exit_code) {
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

Status MpiWorld::WatchPeers(double /*deadline_s*/,
                            std::function<void(const std::string& message)> /*on_lost*/) {
  return Status::Ok();  // one process: no peer to lose
}

std::chrono::milliseconds MpiWorld::LostPeerGrace(double /*deadline_s*/) {
  return std::chrono::milliseconds{0};
}

struct GroupBroadcast::Communicators {};

GroupBroadcast::GroupBroadcast(int /*world_rank*/) {}

GroupBroadcast::~GroupBroadcast() = default;

Status GroupBroadcast::FromFirst(const ProcessGroup& group, void* /*data*/, std::size_t /*bytes*/) {
  if (group.size() <= 1) return Status::Ok();
  return NotCompiled(fmt::format("process group {} has {} members in one process: {}", group.id,
                                 group.size(), kWithoutMpi));
}

BackendAvailability ProbeHostBackend() { return {"host", false, false, kWithoutMpi}; }

Result<std::unique_ptr<Backend>> MakeHostBackend(MpiWorld& /*world*/,
                                                 HostBackendOptions /*options*/) {
  return NotCompiled(fmt::format("the host backend is not available: {}", kWithoutMpi));
}

Result<std::vector<Micros>> TimeBareReduceScatter(MpiWorld& /*world*/,
                                                  const ProcessGroup& /*group*/, DType /*dtype*/,
                                                  Bytes /*send_bytes*/, int /*warmup*/,
                                                  int /*iterations*/) {
  return NotCompiled(fmt::format("the bare MPI reduce-scatter is not available: {}", kWithoutMpi));
}

}  // namespace bucketsim
