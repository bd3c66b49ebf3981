// The MPI job a real backend runs in: one process per rank, launched by `mpirun`. MpiWorld
// initialises MPI once (with MPI_THREAD_MULTIPLE: collectives run on a communication thread
// while the watchdog may abort from another) and gives every rank the same answer about
// failures: Agree() turns each rank's own Status into one outcome that all ranks share, so a
// bad trace on one rank ends every rank with that rank's message instead of a hang.
//
// A build without MPI (-DBUCKETSIM_MPI=OFF, for a GPU machine that has no MPI: tools/
// device-check.sh) has the same class for a job of one process (single_process.cc): rank 0 of 1,
// every collective the identity, Abort the process's exit.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace bucketsim {

class PeerWatch;

// This process's place among the processes of its node: how a rank picks its GPU.
struct NodePlace {
  int local_rank = 0;
  int local_size = 1;
};

class MpiWorld {
 public:
  // MPI_Init_thread, unless MPI is initialised already (then this object does not finalise).
  static Result<std::unique_ptr<MpiWorld>> Init();
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Collective over the world. Ok when every rank passed Ok; otherwise, on every rank, the
  // error of the lowest failing rank with "rank R: " in front of its message.
  Status Agree(const Status& local);
  Status Barrier();
  // Collective: every rank's `local` bytes, in rank order, on rank 0 (empty on the others). How
  // `sweep` under mpirun gathers the ranks' results into one report.
  Result<std::vector<std::string>> GatherToRoot(std::string_view local);
  // Collective: the largest of the ranks' `mine`, on every rank.
  Result<double> MaxOverRanks(double mine);
  // Collective: rank 0's `bytes` at `data`, on every rank.
  Status Broadcast(void* data, std::size_t bytes);
  // Collective: this rank among the processes of its node (MPI_COMM_TYPE_SHARED).
  Result<NodePlace> NodeLocal();
  // Ends every rank of the job now (MPI_Abort): for failures other ranks may be blocked on.
  [[noreturn]] void Abort(int exit_code);

  // Collective: starts the job's lost-rank watch (peer_watch.h), which calls `on_lost` (it must
  // end the job) when a peer is silent for about `deadline_s`. The world owns it and stops it
  // (its goodbyes sent) before MPI is finalised. None on one rank, without MPI_THREAD_MULTIPLE,
  // or with a deadline of 0: peers() is then null.
  Status WatchPeers(double deadline_s, std::function<void(const std::string& message)> on_lost);
  PeerWatch* peers() const { return peers_.get(); }
  // How long `on_lost` should wait after saying why before it ends the job, so that every
  // survivor says it first: two heartbeat intervals (peer_watch.h).
  static std::chrono::milliseconds LostPeerGrace(double deadline_s);

 private:
  MpiWorld(int rank, int size, bool owns);
  int rank_ = 0;
  int size_ = 1;
  bool owns_ = false;
  // shared_ptr: its deleter is fixed where the watch is made, so the world's destructor needs
  // no PeerWatch (a build without MPI has none).
  std::shared_ptr<PeerWatch> peers_;
};

}  // namespace bucketsim
