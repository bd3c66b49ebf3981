#include "backend/host/mpi_world.h"

#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "backend/host/mpi_check.h"
#include "backend/host/peer_watch.h"

namespace bucketsim {

Status MpiStatus(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return DeviceError(fmt::format("{} failed: {}", call,
                                 length > 0 ? std::string(text, length) : "unknown MPI error"));
}

namespace {

// Open MPI's reduce-scatter mallocs a temporary as large as the send buffer on every call and
// frees it on return (ompi/mca/coll/base, coll_base_reduce_scatter_block.c: the recursive
// doubling and halving algorithms and the basic reduce + scatterv one). With glibc's default
// settings a large free goes back to the kernel (munmap above M_MMAP_THRESHOLD, heap trim above
// M_TRIM_THRESHOLD; mallopt(3)), so the next call faults every page of the temporary in again.
// On a virtual machine a fault is expensive: measured on the 2-core CI VM, a 1 MiB
// reduce-scatter took 4.1 ms instead of 0.23 ms on the main thread (whose arena trims) and a
// 64 MiB one 360 ms instead of 30 ms on any thread. NCCL allocates nothing per collective, and
// the caching allocator keeps what PyTorch frees, so the host backend stands in for a device
// only if freed memory stays with the process: one arena (threads share what was freed), no
// mmap for large blocks, and no trimming. Set before MPI starts its own threads.
void KeepFreedMemory() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

// Open MPI's shared-memory transport moves large messages with one copy straight out of the
// peer's memory (CMA, process_vm_readv) by default. On the CI VM that single copy costs what the
// buffers' history decides: a 3 MB reduce-scatter took 0.9 ms in calibrate and 1.7-2.2 ms inside
// a replay, and up to 10 ms on buckets kept across iterations. Through the transport's own
// shared-memory buffers (two copies) it takes 0.5-0.9 ms in both, so what calibrate measures is
// what a replay sees: predicted against measured step time went from -47% to -10% for
// always-allocated at a 5 MB cap, and from -15% to -5% for a mixed workload (docs/time-model.md,
// "How good the time model is here"). A user's own setting of the parameter wins; other MPIs ignore
// it.
void UseTwoCopySharedMemory() {
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", /*overwrite=*/0);
}

}  // namespace

Result<std::unique_ptr<MpiWorld>> MpiWorld::Init() {
  KeepFreedMemory();
  UseTwoCopySharedMemory();
  int initialized = 0;
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Initialized(&initialized));
  bool owns = !initialized;
  if (owns) {
    int provided = 0;
    BUCKETSIM_MPI_RETURN_IF_ERROR(
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      return DeviceError(fmt::format(
          "the MPI library provides thread level {} only; the host backend needs at least "
          "MPI_THREAD_SERIALIZED (collectives run on a communication thread)",
          provided));
    }
  }
  // Errors come back as codes (turned into Status values), not as MPI's default abort.
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int rank = 0;
  int size = 1;
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return std::unique_ptr<MpiWorld>(new MpiWorld(rank, size, owns));
}

MpiWorld::MpiWorld(int rank, int size, bool owns) : rank_(rank), size_(size), owns_(owns) {}

MpiWorld::~MpiWorld() {
  peers_.reset();  // its goodbyes go out over MPI
  if (owns_) MPI_Finalize();
}

Status MpiWorld::Agree(const Status& local) {
  int mine = local.ok() ? size_ : rank_;
  int first = size_;
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first == size_) return Status::Ok();
  // The failing rank tells everyone what went wrong: its code, then its message.
  std::string message = local.message();
  int header[2] = {static_cast<int>(local.code()), static_cast<int>(message.size())};
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Bcast(header, 2, MPI_INT, first, MPI_COMM_WORLD));
  std::vector<char> text(static_cast<std::size_t>(header[1]));
  if (rank_ == first) std::copy(message.begin(), message.end(), text.begin());
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Bcast(text.data(), header[1], MPI_CHAR, first, MPI_COMM_WORLD));
  return Status(static_cast<StatusCode>(header[0]),
                fmt::format("rank {}: {}", first, std::string(text.begin(), text.end())));
}

Result<std::vector<std::string>> MpiWorld::GatherToRoot(std::string_view local) {
  if (local.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument(
        fmt::format("rank {}: {} bytes to gather: more than MPI_Gatherv can", rank_, local.size()));
  }
  int size = static_cast<int>(local.size());
  std::vector<int> sizes(rank_ == 0 ? static_cast<std::size_t>(size_) : 0);
  BUCKETSIM_MPI_RETURN_IF_ERROR(
      MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  std::vector<int> offsets(sizes.size());
  std::size_t total = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    if (total > static_cast<std::size_t>(std::numeric_limits<int>::max() - sizes[r])) {
      return InvalidArgument("the ranks' results exceed what MPI_Gatherv can gather");
    }
    offsets[r] = static_cast<int>(total);
    total += static_cast<std::size_t>(sizes[r]);
  }
  std::string all(total, '\0');
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Gatherv(local.data(), size, MPI_CHAR, all.data(), sizes.data(),
                                            offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<std::string> gathered;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    gathered.push_back(
        all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(sizes[r])));
  }
  return gathered;
}

Status MpiWorld::Barrier() {
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Barrier(MPI_COMM_WORLD));
  return Status::Ok();
}

Result<double> MpiWorld::MaxOverRanks(double mine) {
  double largest = mine;
  BUCKETSIM_MPI_RETURN_IF_ERROR(
      MPI_Allreduce(&mine, &largest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return largest;
}

Status MpiWorld::Broadcast(void* data, std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument(fmt::format("{} bytes to broadcast: more than MPI_Bcast can", bytes));
  }
  BUCKETSIM_MPI_RETURN_IF_ERROR(
      MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD));
  return Status::Ok();
}

Result<NodePlace> MpiWorld::NodeLocal() {
  MPI_Comm node = MPI_COMM_NULL;
  BUCKETSIM_MPI_RETURN_IF_ERROR(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  NodePlace place;
  const int rank_code = MPI_Comm_rank(node, &place.local_rank);
  const int size_code = MPI_Comm_size(node, &place.local_size);
  MPI_Comm_free(&node);
  BUCKETSIM_MPI_RETURN_IF_ERROR(rank_code);
  BUCKETSIM_MPI_RETURN_IF_ERROR(size_code);
  return place;
}

Status MpiWorld::WatchPeers(double deadline_s,
                            std::function<void(const std::string& message)> on_lost) {
  PeerWatch::Options options;
  options.deadline_s = deadline_s;
  options.on_lost = std::move(on_lost);
  Result<std::unique_ptr<PeerWatch>> started = PeerWatch::Start(std::move(options));
  if (!started.ok()) return started.status();
  peers_ = std::move(*started);
  return Status::Ok();
}

std::chrono::milliseconds MpiWorld::LostPeerGrace(double deadline_s) {
  return PeerWatch::GraceFor(deadline_s);
}

void MpiWorld::Abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace bucketsim
