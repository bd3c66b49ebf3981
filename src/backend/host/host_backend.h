// The host backend: the replay executed for real on CPUs, one MPI rank per process. Every
// buffer the policy creates exists as host memory (bucket data and output, the stack, cat and
// .contiguous() temporaries, bypass outputs); the stacked gradients are filled with the
// verification pattern, the bucket copy-in is a real copy, and every reduce-scatter is a real
// MPI_Reduce_scatter_block (an all-reduce a real MPI_Allreduce) on the communicator of its
// group object. Each trace stream is a
// StreamWorker thread: compute spans run there as timed waits (the device is busy, the host
// core is free) while the post-backward
// stream's worker runs the copies and collectives, so communication overlaps compute as it does
// on fairscale's post-backward CUDA stream.
//
// Memory is taken in host order, when the engine asks (as PyTorch's allocator serves requests
// when the program makes them), and given back once the stream it was released on has run
// everything queued before the release (as the caching allocator reuses a block in stream
// order). Trace allocations are accounted by the memory model; with `materialize_all` they are
// also allocated and touched, so the process's memory follows the trace.
//
// A failure other ranks may be blocked on (an MPI error, a failed allocation, a collective that
// outlives `timeout_s`) goes to `on_fatal`, which must end the job (MpiWorld::Abort). With a
// PeerWatch (peer_watch.h), each collective tells it the event reached, and a collective that
// outlives `timeout_s` while a peer has stopped answering is left to the watch, which names
// that peer; when every peer answers, a collective's timeout says so and names the rank furthest
// behind, if one is behind this rank.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/host/group_communicators.h"
#include "backend/host/mpi_world.h"
#include "backend/host/peer_watch.h"
#include "backend/host/stream_worker.h"

namespace bucketsim {

struct HostBackendOptions {
  bool materialize_all = false;
  bool verify = true;
  double compute_scale = 1.0;  // compute spans run for dur_us * compute_scale
  double timeout_s = 0;        // 0: no watchdog
  PeerWatch* peers = nullptr;  // the job's lost-rank watch, when there is one (not owned)
  std::function<void(const std::string& message)> on_fatal;
};

class HostBackend final : public Backend {
 public:
  HostBackend(MpiWorld& world, HostBackendOptions options);
  ~HostBackend() override;

  std::string_view name() const override { return "host"; }
  Status Start(const TraceHeader& header) override;
  void Materialize(BufferHandle buffer, Bytes bytes, StreamId stream) override;
  void Release(BufferHandle buffer, StreamId stream) override;
  void FillGradient(const GradientFill& fill, StreamId stream) override;
  void Copy(const BufferCopy& copy, StreamId stream) override;
  void Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                  StreamId stream) override;
  void Compute(StreamId stream, Micros duration) override;
  void WaitStream(StreamId waiter, StreamId producer) override;
  Result<IterationSpans> EndIteration() override;
  ExecutionFacts facts() const override;

 private:
  struct Worker;
  Worker& WorkerFor(StreamId stream);
  Micros Now() const;
  Micros Since(StreamWorker::Clock::time_point when) const;  // µs from the backend's epoch
  // The memory of a materialized buffer; null when it is not materialized. Operations resolve
  // their buffers when they are issued, so a handle the engine reuses later cannot mislead them.
  std::byte* Data(BufferHandle buffer) const;
  void Fatal(const std::string& message);
  void Track(std::int64_t delta_bytes);
  void RunCollective(const CollectiveRecord& record, std::byte* in, std::byte* out, bool in_place,
                     const std::vector<ReducedSlice>& slices, std::uint64_t index, Worker& worker);
  void RunFrameworkCollective(const CollectiveRecord& record, std::byte* data, std::uint64_t index,
                              Worker& worker);
  static MPI_Datatype MpiType(DType dtype);
  MPI_Op MpiSum(DType dtype) const;
  void Verify(const CollectiveRecord& record, const std::vector<ReducedSlice>& slices,
              const std::byte* output);
  void Mismatch(std::string message);
  void WatchdogLoop();

  MpiWorld& world_;
  HostBackendOptions options_;
  const TraceHeader* header_ = nullptr;
  bool emulated_ = false;
  std::string emulation_note_;
  StreamWorker::Clock::time_point epoch_;
  Micros iteration_start_us_ = 0;

  std::vector<std::unique_ptr<Worker>> workers_;  // by stream
  // Policy buffers, by handle: touched only by the worker of the stream they live on.
  struct OwnedBuffer {
    std::unique_ptr<std::byte[]> memory;
    Bytes bytes = 0;
  };
  // Materialized buffers by handle (policy buffers; trace allocations with materialize_all).
  // The engine's thread only: workers get pointers, resolved when an operation is issued.
  std::unordered_map<BufferHandle, OwnedBuffer> buffers_;
  GroupCommunicators communicators_;
  MPI_Op fp16_sum_ = MPI_OP_NULL;
  MPI_Op bf16_sum_ = MPI_OP_NULL;
  std::uint64_t collectives_issued_ = 0;
  // MPI matches the collectives of a communicator in call order, and the streams' workers run
  // concurrently: each collective waits for its turn, its number in issue order (the same on
  // every rank, which replays the same trace), so every rank calls MPI in that one order, one
  // call at a time (MPI_THREAD_SERIALIZED suffices). No deadlock: a collective's stream only
  // waits for work issued before it. `next_turn_` is the number whose turn it is.
  class Turn;
  std::mutex turn_mutex_;
  std::condition_variable turn_cv_;
  std::uint64_t next_turn_ = 0;

  std::atomic<std::int64_t> materialized_bytes_{0};
  std::atomic<std::int64_t> materialized_peak_bytes_{0};
  std::atomic<std::uint64_t> verified_collectives_{0};
  std::atomic<std::uint64_t> verify_failures_{0};
  mutable std::mutex failure_mutex_;
  std::string first_mismatch_;
  Status fatal_;  // the first fatal failure, for EndIteration when no on_fatal is set

  std::atomic<bool> stopping_{false};
  std::thread watchdog_;
};

}  // namespace bucketsim
