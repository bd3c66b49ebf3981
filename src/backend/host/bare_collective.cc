#include "backend/host/bare_collective.h"

#include <mpi.h>

#include <chrono>
#include <cstring>

#include "backend/host/group_communicators.h"
#include "backend/host/mpi_check.h"

namespace bucketsim {

Result<std::vector<Micros>> TimeBareReduceScatter(MpiWorld& world, const ProcessGroup& group,
                                                  DType dtype, Bytes send_bytes, int warmup,
                                                  int iterations) {
  using Clock = std::chrono::steady_clock;
  GroupCommunicators communicators(world.rank());
  Result<MPI_Comm> comm = communicators.Get(group);
  if (!comm.ok()) return comm.status();
  const Bytes element = ElementSize(dtype);
  const MPI_Datatype type = dtype == DType::kFloat64 ? MPI_DOUBLE : MPI_FLOAT;
  const Numel count = send_bytes / (element * static_cast<Bytes>(world.size()));
  std::vector<std::byte> in(send_bytes, std::byte{0});
  std::vector<std::byte> source(send_bytes, std::byte{0});
  std::vector<std::byte> out(count * element);
  std::vector<Micros> times;
  for (int i = 0; i < warmup + iterations; ++i) {
    // Refilled after the barrier and before each call, as the backend's input is
    // (MeasureBackendCollectives): both time the collective from when their own rank's fill
    // ended, so both include waiting for a peer whose fill ended later.
    BUCKETSIM_RETURN_IF_ERROR(world.Barrier());
    std::memcpy(in.data(), source.data(), in.size());
    const auto start = Clock::now();
    BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Reduce_scatter_block(
        in.data(), out.data(), static_cast<int>(count), type, MPI_SUM, *comm));
    const Micros mine = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    Result<Micros> slowest = world.MaxOverRanks(mine);
    if (!slowest.ok()) return slowest.status();
    if (i >= warmup) times.push_back(*slowest);
  }
  return times;
}

}  // namespace bucketsim
