// The MPI job a real backend runs in: one process per rank, launched by `mpirun`. MpiWorld
// initialises MPI once (with MPI_THREAD_MULTIPLE: collectives run on a communication thread
// while the watchdog may abort from another) and gives every rank the same answer about
// failures: Agree() turns each rank's own Status into one outcome that all ranks share, so a
// bad trace on one rank ends every rank with that rank's message instead of a hang.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace bucketsim {

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
  // Ends every rank of the job now (MPI_Abort): for failures other ranks may be blocked on.
  [[noreturn]] void Abort(int exit_code);

 private:
  MpiWorld(int rank, int size, bool owns);
  int rank_ = 0;
  int size_ = 1;
  bool owns_ = false;
};

}  // namespace bucketsim
