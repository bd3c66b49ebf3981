#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/communicator_plan.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_buffer_table.h"
#include "backend/cuda/reduce_type.h"
#include "backend/cuda/spin_calibration.h"
#include "backend/cuda/stream_plan.h"
#include "backend/host/group_broadcast.h"
#include "backend/host/mpi_world.h"
#include "backend/slice_check.h"

namespace bucketsim {
namespace {

ncclDataType_t NcclType(ReduceType type) {
  switch (type) {
    case ReduceType::kFloat16:
      return ncclFloat16;
    case ReduceType::kBFloat16:
      return ncclBfloat16;
    case ReduceType::kFloat32:
      return ncclFloat32;
    case ReduceType::kFloat64:
      return ncclFloat64;
  }
  return ncclFloat32;  // unreachable: the switch covers every ReduceType
}

// Fires `fire` from its own thread when a blocking section (communicator set-up, the wait at an
// iteration's end) lasts longer than the timeout.
class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  Watchdog(double timeout_s, std::function<void(const std::string&)> fire)
      : timeout_(
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))),
        fire_(std::move(fire)),
        thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Arm(std::string what) {
    {
      std::lock_guard lock(mutex_);
      armed_ = true;
      what_ = std::move(what);
      since_ = Clock::now();
    }
    cv_.notify_all();
  }
  void Disarm() {
    std::lock_guard lock(mutex_);
    armed_ = false;
  }

 private:
  void Loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      Clock::time_point deadline = since_ + timeout_;
      cv_.wait_until(lock, deadline);
      if (stopping_ || !armed_ || Clock::now() < since_ + timeout_) continue;
      armed_ = false;
      std::string what = what_;
      lock.unlock();
      fire_(what);
      lock.lock();
    }
  }

  Clock::duration timeout_;
  std::function<void(const std::string&)> fire_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool stopping_ = false;
  std::string what_;
  Clock::time_point since_;
  std::thread thread_;
};

// Arms the watchdog (if any) for the lifetime of a blocking section.
class ArmedSection {
 public:
  ArmedSection(Watchdog* watchdog, std::string what) : watchdog_(watchdog) {
    if (watchdog_ != nullptr) watchdog_->Arm(std::move(what));
  }
  ~ArmedSection() {
    if (watchdog_ != nullptr) watchdog_->Disarm();
  }
  ArmedSection(const ArmedSection&) = delete;
  ArmedSection& operator=(const ArmedSection&) = delete;

 private:
  Watchdog* watchdog_;
};

// Verification results live in device memory, in chunks of this many slices; an iteration
// that checks more slices allocates another chunk.
constexpr std::size_t kVerifyChunkSlots = 16384;

struct VerifyChunk {
  unsigned long long* mismatches = nullptr;
  unsigned long long* first_index = nullptr;
  float* first_value = nullptr;
};

// One checked slice, as the host needs it to explain a mismatch.
struct VerifyCheck {
  std::uint64_t collective = 0;
  EventIndex event = 0;
  GroupId group = 0;
  ReducedSlice slice;
  std::uint64_t first_j = 0;
  PatternExpectation expectation;
};

struct PendingSpan {
  SpanKind kind = SpanKind::kCompute;
  StreamId stream = 0;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
};

struct Communicator {
  CommunicatorPlan plan;
  ncclComm_t comm = nullptr;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(MpiWorld& world, CudaBackendOptions options, int device)
      : world_(world),
        options_(std::move(options)),
        device_(device),
        buffers_(options_.materialize_all) {
    if (options_.timeout_s > 0) {
      watchdog_ = std::make_unique<Watchdog>(options_.timeout_s,
                                             [this](const std::string& what) { OnTimeout(what); });
    }
  }
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  Status Start(const TraceHeader& header) override;
  void Materialize(BufferHandle buffer, Bytes bytes, StreamId stream) override {
    Defer(DoMaterialize(buffer, bytes, stream));
  }
  void Release(BufferHandle buffer, StreamId stream) override { Defer(DoRelease(buffer, stream)); }
  void FillGradient(const GradientFill& fill, StreamId stream) override {
    Defer(DoFillGradient(fill, stream));
  }
  void Copy(const BufferCopy& copy, StreamId stream) override { Defer(DoCopy(copy, stream)); }
  void Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                  StreamId stream) override {
    Defer(DoCollective(record, buffers, stream));
  }
  void Compute(StreamId stream, Micros duration) override { Defer(DoCompute(stream, duration)); }
  void WaitStream(StreamId waiter, StreamId producer) override {
    Defer(DoWaitStream(waiter, producer));
  }
  Result<IterationSpans> EndIteration() override;
  ExecutionFacts facts() const override;

 private:
  // Calls between iterations cannot return an error; the first one is kept, later calls do
  // nothing, and EndIteration returns it.
  void Defer(Status status) {
    if (!status.ok() && deferred_.ok()) deferred_ = Fatal(std::move(status));
  }
  // With other ranks in the job, a failure here leaves them waiting in a collective: it goes
  // to on_fatal, which ends the job. Alone, the error is returned.
  Status Fatal(Status status) {
    if (!status.ok() && world_.size() > 1 && options_.on_fatal)
      options_.on_fatal(status.ToString());
    return status;
  }
  Status DoMaterialize(BufferHandle buffer, Bytes bytes, StreamId stream);
  Status DoRelease(BufferHandle buffer, StreamId stream);
  Status DoFillGradient(const GradientFill& fill, StreamId stream);
  Status DoCopy(const BufferCopy& copy, StreamId stream);
  Status DoCollective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                      StreamId stream);
  // After DoCollective resolved the type, the CUDA stream `s` and the communicator.
  Status DoReduceScatter(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                         StreamId stream, ReduceType type, cudaStream_t s, Communicator& comm);
  Status DoFrameworkCollective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                               StreamId stream, ReduceType type, cudaStream_t s,
                               Communicator& comm);
  Result<void*> FrameworkMemory(BufferHandle buffer, Bytes bytes, StreamId stream, cudaStream_t s);
  Status DoCompute(StreamId stream, Micros duration);
  Status DoWaitStream(StreamId waiter, StreamId producer);

  Status Calibrate();
  Result<cudaStream_t> StreamFor(StreamId stream) const;
  Result<void*> Address(BufferHandle buffer, const char* role) const;
  Result<cudaEvent_t> NextEvent();
  Status BeginSpan(cudaStream_t stream, PendingSpan& span);
  Status EndSpan(cudaStream_t stream, PendingSpan span);
  Result<Communicator*> CommunicatorFor(GroupId group);
  Status CheckSlices(const CollectiveRecord& record, const PatternExpectation& expectation,
                     const void* output, ReduceType type, std::span<const ReducedSlice> slices,
                     cudaStream_t stream);
  Result<VerifySlot> NextVerifySlot();
  Status WaitForStreams();
  Status CollectVerification();
  Result<Micros> SinceOrigin(cudaEvent_t event) const;
  Status MoveAnchor();
  void SampleDeviceMemory();
  void OnTimeout(const std::string& what);

  MpiWorld& world_;
  CudaBackendOptions options_;
  int device_;
  std::unique_ptr<Watchdog> watchdog_;
  std::atomic<bool> timed_out_{false};
  std::string timeout_message_;  // written before timed_out_ is set

  const TraceHeader* header_ = nullptr;
  ExecutionPlan plan_;
  StreamPlan stream_plan_;
  std::vector<cudaStream_t> streams_;
  DeviceBufferTable buffers_;
  std::unique_ptr<GroupBroadcast> bootstrap_;  // NCCL unique ids over MPI
  std::mutex comms_mutex_;                     // the watchdog aborts communicators from its thread
  std::unordered_map<GroupId, Communicator> comms_;
  double cycles_per_us_ = 0;

  // Span times are read against an anchor event recorded when the previous iteration ended,
  // whose own time since the start is kept in double: cudaEventElapsedTime's float
  // milliseconds would lose microseconds over a long run if read against the start itself.
  cudaEvent_t anchor_ = nullptr;
  cudaEvent_t next_anchor_ = nullptr;
  Micros anchor_us_ = 0;
  std::vector<cudaEvent_t> events_;
  std::size_t next_event_ = 0;
  std::vector<PendingSpan> spans_;
  Micros iteration_start_us_ = 0;

  std::vector<VerifyChunk> verify_chunks_;
  std::vector<VerifyCheck> checks_;
  // Per stream: where a framework collective runs when its trace allocation holds no memory.
  std::unordered_map<StreamId, DeviceBufferTable::Entry> scratch_;
  std::uint64_t collectives_ = 0;
  std::uint64_t verified_collectives_ = 0;
  std::uint64_t verify_failures_ = 0;
  std::string first_mismatch_;

  cudaMemPool_t pool_ = nullptr;
  Bytes device_used_before_ = 0;
  Bytes device_used_peak_ = 0;

  Status deferred_;
};

CudaBackend::~CudaBackend() {
  watchdog_.reset();
  // Errors are ignored from here on: the run's outcome is already decided.
  (void)cudaDeviceSynchronize();
  cudaStream_t stream = streams_.empty() ? nullptr : streams_[0];
  for (const DeviceBufferTable::Entry& entry : buffers_.TakeAll()) {
    (void)cudaFreeAsync(entry.address, stream);
  }
  for (const auto& [id, entry] : scratch_) (void)cudaFreeAsync(entry.address, stream);
  for (auto& [id, communicator] : comms_) {
    if (communicator.comm != nullptr) (void)ncclCommDestroy(communicator.comm);
  }
  for (VerifyChunk& chunk : verify_chunks_) {
    (void)cudaFree(chunk.mismatches);
    (void)cudaFree(chunk.first_index);
    (void)cudaFree(chunk.first_value);
  }
  for (cudaEvent_t event : events_) (void)cudaEventDestroy(event);
  if (anchor_ != nullptr) (void)cudaEventDestroy(anchor_);
  if (next_anchor_ != nullptr) (void)cudaEventDestroy(next_anchor_);
  (void)cudaDeviceSynchronize();
  for (cudaStream_t s : streams_) (void)cudaStreamDestroy(s);
}

Status CudaBackend::Start(const TraceHeader& header) {
  header_ = &header;
  Result<ExecutionPlan> plan = PlanExecution(world_.size(), world_.rank(), header);
  if (!plan.ok()) return plan.status();
  plan_ = *plan;
  if (!plan_.emulated && world_.size() > 1) {
    bootstrap_ = std::make_unique<GroupBroadcast>(world_.rank());
  }
  stream_plan_ = StreamPlan::ForTrace(header);
  for (int slot = 0; slot < stream_plan_.streams(); ++slot) {
    cudaStream_t stream = nullptr;
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    streams_.push_back(stream);
  }
  // Buffers come from the device's default pool, stream-ordered (cudaMallocAsync): allocating
  // and freeing never synchronise the device (cudaMalloc/cudaFree would, and would serialise
  // the streams the replay wants to overlap), and a release threshold of "never" keeps freed
  // memory in the pool for the next buffer, as PyTorch's caching allocator keeps its blocks.
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool_, device_));
  std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
  BUCKETSIM_CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_all));
  // The pool is the device's, shared with the replays of earlier policies in this process:
  // what they left reserved goes back to the driver before this run measures anything.
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemPoolTrimTo(pool_, 0));
  std::uint64_t zero = 0;  // resets the high-water mark to the current reservation
  BUCKETSIM_CUDA_RETURN_IF_ERROR(
      cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  device_used_before_ = total_bytes - free_bytes;
  device_used_peak_ = device_used_before_;
  BUCKETSIM_RETURN_IF_ERROR(Calibrate());
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&anchor_));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&next_anchor_));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(anchor_, streams_[0]));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(anchor_));
  return Status::Ok();
}

Status CudaBackend::Calibrate() {
  // A short and a long spin, each the fastest of three, timed with events (spin_calibration.h).
  constexpr std::uint64_t kShortCycles = std::uint64_t{1} << 20;
  constexpr std::uint64_t kLongCycles = std::uint64_t{1} << 24;
  cudaStream_t stream = streams_[0];
  cudaEvent_t before = nullptr;
  cudaEvent_t after = nullptr;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&before));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&after));
  auto time = [&](std::uint64_t cycles) -> Result<SpinSample> {
    SpinSample best{cycles, std::numeric_limits<double>::infinity()};
    for (int repeat = 0; repeat < 3; ++repeat) {
      BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(before, stream));
      BUCKETSIM_CUDA_RETURN_IF_ERROR(LaunchSpin(cycles, stream));
      BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(after, stream));
      BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(after));
      float ms = 0;
      BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, before, after));
      best.elapsed_ms = std::min(best.elapsed_ms, static_cast<double>(ms));
    }
    return best;
  };
  Result<SpinSample> warmup = time(kShortCycles);  // first launch loads the module
  Result<SpinSample> short_sample = warmup.ok() ? time(kShortCycles) : warmup;
  Result<SpinSample> long_sample = short_sample.ok() ? time(kLongCycles) : short_sample;
  (void)cudaEventDestroy(before);
  (void)cudaEventDestroy(after);
  if (!long_sample.ok()) return long_sample.status();
  Result<double> rate = CyclesPerMicro(*short_sample, *long_sample);
  if (!rate.ok()) return rate.status();
  cycles_per_us_ = *rate;
  return Status::Ok();
}

Result<cudaStream_t> CudaBackend::StreamFor(StreamId stream) const {
  Result<int> slot = stream_plan_.Slot(stream);
  if (!slot.ok()) return slot.status();
  return streams_[static_cast<std::size_t>(*slot)];
}

Result<void*> CudaBackend::Address(BufferHandle buffer, const char* role) const {
  void* address = buffers_.Find(buffer);
  if (address == nullptr) {
    return Status(StatusCode::kInternal,
                  fmt::format("the {} buffer {} holds no device memory", role, buffer));
  }
  return address;
}

Result<cudaEvent_t> CudaBackend::NextEvent() {
  if (next_event_ == events_.size()) {
    cudaEvent_t event = nullptr;
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));
    events_.push_back(event);
  }
  return events_[next_event_++];
}

Status CudaBackend::BeginSpan(cudaStream_t stream, PendingSpan& span) {
  Result<cudaEvent_t> start = NextEvent();
  if (!start.ok()) return start.status();
  span.start = *start;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(span.start, stream));
  return Status::Ok();
}

Status CudaBackend::EndSpan(cudaStream_t stream, PendingSpan span) {
  Result<cudaEvent_t> end = NextEvent();
  if (!end.ok()) return end.status();
  span.end = *end;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(span.end, stream));
  spans_.push_back(span);
  return Status::Ok();
}

Status CudaBackend::DoMaterialize(BufferHandle buffer, Bytes bytes, StreamId stream) {
  if (!deferred_.ok() || !buffers_.Wants(buffer, bytes)) return Status::Ok();
  Result<cudaStream_t> s = StreamFor(stream);
  if (!s.ok()) return s.status();
  void* address = nullptr;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&address, bytes, *s));
  buffers_.Insert(buffer, {address, bytes});
  // A trace allocation is touched so its pages exist; policy buffers are written by the
  // fill, copy or collective that follows.
  if ((buffer & kTraceBufferBit) != 0) {
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(address, 0, bytes, *s));
  }
  return Status::Ok();
}

Status CudaBackend::DoRelease(BufferHandle buffer, StreamId stream) {
  if (!deferred_.ok()) return Status::Ok();
  std::optional<DeviceBufferTable::Entry> entry = buffers_.Take(buffer);
  if (!entry) return Status::Ok();
  Result<cudaStream_t> s = StreamFor(stream);
  if (!s.ok()) return s.status();
  // Stream-ordered: the memory returns to the pool after the work queued on `stream` so far.
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaFreeAsync(entry->address, *s));
  return Status::Ok();
}

Status CudaBackend::DoFillGradient(const GradientFill& fill, StreamId stream) {
  if (!deferred_.ok()) return Status::Ok();
  Result<ReduceType> type = ReduceTypeFor(fill.dtype);
  if (!type.ok()) {
    return Status(type.status().code(),
                  fmt::format("event {}: {}", fill.request, type.status().message()));
  }
  Result<cudaStream_t> s = StreamFor(stream);
  if (!s.ok()) return s.status();
  Result<void*> address = Address(fill.buffer, "gradient");
  if (!address.ok()) return address.status();
  BUCKETSIM_CUDA_RETURN_IF_ERROR(LaunchFillPattern(*address, *type, fill.offset, fill.rows,
                                                   fill.numel, fill.RowStride(), fill.request,
                                                   plan_.trace_rank, *s));
  return Status::Ok();
}

Status CudaBackend::DoCopy(const BufferCopy& copy, StreamId stream) {
  if (!deferred_.ok() || copy.cols == 0 || copy.rows == 0) return Status::Ok();
  Result<cudaStream_t> s = StreamFor(stream);
  if (!s.ok()) return s.status();
  Result<void*> dst = Address(copy.dst, "copy destination");
  if (!dst.ok()) return dst.status();
  Result<void*> src = Address(copy.src, "copy source");
  if (!src.ok()) return src.status();
  Bytes element = ElementSize(copy.dtype);
  PendingSpan span{SpanKind::kCopy, stream, nullptr, nullptr};
  BUCKETSIM_RETURN_IF_ERROR(BeginSpan(*s, span));
  // The 2-D column copy of buffer_ops.h: one row of `cols` elements per row, pitched.
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(
      static_cast<char*>(*dst) + copy.dst_col * element, copy.dst_row_numel * element,
      static_cast<const char*>(*src) + copy.src_col * element, copy.src_row_numel * element,
      copy.cols * element, static_cast<std::size_t>(copy.rows), cudaMemcpyDeviceToDevice, *s));
  return EndSpan(*s, span);
}

Result<Communicator*> CudaBackend::CommunicatorFor(GroupId id) {
  {
    std::lock_guard lock(comms_mutex_);
    if (auto it = comms_.find(id); it != comms_.end()) return &it->second;
  }
  const ProcessGroup* group = header_->FindGroup(id);
  if (group == nullptr) return InvalidTrace(fmt::format("unknown process group {}", id));
  Result<CommunicatorPlan> plan = PlanCommunicator(*group, plan_);
  if (!plan.ok()) return plan.status();
  ArmedSection armed(watchdog_.get(),
                     fmt::format("creating the NCCL communicator of process group {}", id));
  // nccl-tests' bootstrap: position 0 makes the id, the group's MPI communicator carries it.
  ncclUniqueId unique_id{};
  if (plan->nccl_rank == 0) BUCKETSIM_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&unique_id));
  if (plan->bootstrap_over_mpi) {
    BUCKETSIM_RETURN_IF_ERROR(bootstrap_->FromFirst(*group, &unique_id, sizeof(unique_id)));
  }
  Communicator communicator{*plan, nullptr};
  BUCKETSIM_NCCL_RETURN_IF_ERROR(
      ncclCommInitRank(&communicator.comm, plan->nccl_ranks, unique_id, plan->nccl_rank));
  std::lock_guard lock(comms_mutex_);
  return &comms_.emplace(id, communicator).first->second;
}

// What every collective needs first (its element type, its stream, its group's communicator),
// then the policy's reduction or the framework's own collective.
Status CudaBackend::DoCollective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                                 StreamId stream) {
  if (!deferred_.ok()) return Status::Ok();
  Result<ReduceType> type = ReduceTypeFor(record.dtype);
  if (!type.ok()) {
    return Status(type.status().code(),
                  fmt::format("event {}: {}", record.event_index, type.status().message()));
  }
  Result<cudaStream_t> s = StreamFor(stream);
  if (!s.ok()) return s.status();
  Result<Communicator*> comm = CommunicatorFor(record.group);
  if (!comm.ok()) return comm.status();
  return buffers.framework ? DoFrameworkCollective(record, buffers, stream, *type, *s, **comm)
                           : DoReduceScatter(record, buffers, stream, *type, *s, **comm);
}

Status CudaBackend::DoReduceScatter(const CollectiveRecord& record,
                                    const CollectiveBuffers& buffers, StreamId stream,
                                    ReduceType type, cudaStream_t s, Communicator& comm) {
  const CommunicatorPlan& plan = comm.plan;
  BUCKETSIM_CHECK(plan.members == record.group_size);
  Result<void*> base = Address(buffers.input, "collective input");
  if (!base.ok()) return base.status();
  Result<void*> output = Address(buffers.output, "collective output");
  if (!output.ok()) return output.status();
  const Bytes element = ElementSize(record.dtype);
  void* input = static_cast<char*>(*base) + buffers.input_offset * element;
  const bool in_place = buffers.input == buffers.output;
  const bool all_reduce = record.kind == CollectiveKind::kAllReduce;
  if (in_place) {
    // NCCL's in-place forms: an all-reduce overwrites its input; a reduce-scatter's shard is
    // the input's range at this rank's position.
    const int position = plan.expectation.emulated ? 0 : plan.expectation.position;
    *output =
        static_cast<char*>(input) + (all_reduce ? 0 : position * record.output_numel * element);
  }
  ncclDataType_t nccl_type = NcclType(type);
  PendingSpan span{SpanKind::kCollective, stream, nullptr, nullptr};
  BUCKETSIM_RETURN_IF_ERROR(BeginSpan(s, span));
  if (all_reduce) {
    // Emulated (a world of one), NCCL's all-reduce of one rank: the input itself.
    BUCKETSIM_NCCL_RETURN_IF_ERROR(
        ncclAllReduce(input, *output, record.input_numel, nccl_type, ncclSum, comm.comm, s));
  } else if (plan.expectation.emulated) {
    // A world of one: NCCL's reduce-scatter of the whole buffer onto itself (in place), then the
    // n-row reduction the n ranks would have done, over the same bytes.
    BUCKETSIM_NCCL_RETURN_IF_ERROR(
        ncclReduceScatter(input, input, record.input_numel, nccl_type, ncclSum, comm.comm, s));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        LaunchReduceRows(input, *output, type, plan.members, record.output_numel, s));
  } else {
    BUCKETSIM_NCCL_RETURN_IF_ERROR(
        ncclReduceScatter(input, *output, record.output_numel, nccl_type, ncclSum, comm.comm, s));
  }
  BUCKETSIM_RETURN_IF_ERROR(EndSpan(s, span));
  PatternExpectation expectation = plan.expectation;
  if (record.replicate_group) {
    // HYBRID_SHARD: the shard is then summed over the rank's replicas, in place; a 2-D mesh of
    // shard groups by replicas covers the world once, so every rank's term is in the sum.
    Result<Communicator*> replicas = CommunicatorFor(*record.replicate_group);
    if (!replicas.ok()) return replicas.status();
    PendingSpan second{SpanKind::kCollective, stream, nullptr, nullptr};
    BUCKETSIM_RETURN_IF_ERROR(BeginSpan(s, second));
    if (!expectation.emulated) {
      BUCKETSIM_NCCL_RETURN_IF_ERROR(ncclAllReduce(*output, *output, record.output_numel, nccl_type,
                                                   ncclSum, (*replicas)->comm, s));
      expectation.members *= (*replicas)->plan.members;
      expectation.rank_term_sum = 0;
      for (int r = 0; r < header_->world_size; ++r) expectation.rank_term_sum += PatternRankTerm(r);
    }
    BUCKETSIM_RETURN_IF_ERROR(EndSpan(s, second));
  }
  ++collectives_;
  if (!options_.verify) return Status::Ok();
  verified_collectives_ += record.replicate_group ? 2 : 1;  // the replicas' sum is checked too
  return CheckSlices(record, expectation, *output, type, buffers.slices, s);
}

// The trace allocation's memory, or this stream's scratch grown to `bytes` (stream-ordered).
Result<void*> CudaBackend::FrameworkMemory(BufferHandle buffer, Bytes bytes, StreamId stream,
                                           cudaStream_t s) {
  if (void* address = buffers_.Find(buffer); address != nullptr) return address;
  DeviceBufferTable::Entry& scratch = scratch_[stream];
  if (scratch.bytes < bytes) {
    if (scratch.address != nullptr)
      BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaFreeAsync(scratch.address, s));
    scratch = {};
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&scratch.address, bytes, s));
    scratch.bytes = bytes;
  }
  return scratch.address;
}

// The framework's all-gather (in place: this rank's part at its position) or all-reduce of a
// trace allocation; this rank's part filled with the event's pattern first (core/buffer_ops.h).
Status CudaBackend::DoFrameworkCollective(const CollectiveRecord& record,
                                          const CollectiveBuffers& buffers, StreamId stream,
                                          ReduceType type, cudaStream_t s, Communicator& comm) {
  const CommunicatorPlan& plan = comm.plan;
  const bool all_gather = record.kind == CollectiveKind::kAllGather;
  const Bytes element = ElementSize(record.dtype);
  const Numel count = record.input_numel;
  Result<void*> base = FrameworkMemory(buffers.input, record.output_numel * element, stream, s);
  if (!base.ok()) return base.status();
  char* data = static_cast<char*>(*base) + buffers.input_offset * element;
  const bool emulated = plan.expectation.emulated;
  const int position = emulated ? 0 : plan.expectation.position;
  const Numel mine = all_gather ? position * count : 0;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(LaunchFillPattern(data, type, mine, 1, count, count,
                                                   record.event_index, plan_.trace_rank, s));
  const ncclDataType_t nccl_type = NcclType(type);
  PendingSpan span{SpanKind::kCollective, stream, nullptr, nullptr};
  BUCKETSIM_RETURN_IF_ERROR(BeginSpan(s, span));
  if (!all_gather) {
    BUCKETSIM_NCCL_RETURN_IF_ERROR(
        ncclAllReduce(data, data, count, nccl_type, ncclSum, comm.comm, s));
  } else if (emulated) {
    // A world of one standing in for the group: every part is this rank's own.
    for (int p = 1; p < record.group_size; ++p) {
      BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(data + p * count * element, data,
                                                     count * element, cudaMemcpyDeviceToDevice, s));
    }
  } else {
    // NCCL's in-place all-gather: the send buffer is this rank's part of the receive buffer.
    BUCKETSIM_NCCL_RETURN_IF_ERROR(
        ncclAllGather(data + mine * element, data, count, nccl_type, comm.comm, s));
  }
  BUCKETSIM_RETURN_IF_ERROR(EndSpan(s, span));
  ++collectives_;
  if (!options_.verify) return Status::Ok();
  ++verified_collectives_;
  const ReducedSlice whole{record.event_index, 0, count};
  if (!all_gather) return CheckSlices(record, plan.expectation, data, type, {&whole, 1}, s);
  // After an all-gather, part p is member p's pattern: the expectation of one member, row 0.
  const ProcessGroup* group = header_->FindGroup(record.group);
  for (int p = 0; p < record.group_size; ++p) {
    const int member = emulated ? plan_.trace_rank : group->ranks[p];
    const PatternExpectation expectation{1, 0, member, PatternRankTerm(member), false};
    Result<VerifySlot> slot = NextVerifySlot();
    if (!slot.ok()) return slot.status();
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        LaunchVerify(data, type, p * count, count, 0, record.event_index, expectation, *slot, s));
    checks_.push_back({collectives_, record.event_index, record.group,
                       ReducedSlice{record.event_index, p * count, count}, 0, expectation});
  }
  return Status::Ok();
}

Status CudaBackend::CheckSlices(const CollectiveRecord& record,
                                const PatternExpectation& expectation, const void* output,
                                ReduceType type, std::span<const ReducedSlice> slices,
                                cudaStream_t stream) {
  for (const ReducedSlice& given : slices) {
    const SliceCheck check = CheckOfSlice(record, given, expectation);
    if (check.output.numel == 0) continue;
    Result<VerifySlot> slot = NextVerifySlot();
    if (!slot.ok()) return slot.status();
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        LaunchVerify(output, type, check.output.offset, check.output.numel, check.first_j,
                     check.output.request, check.expectation, *slot, stream));
    checks_.push_back({collectives_, record.event_index, record.group, check.output, check.first_j,
                       check.expectation});
  }
  return Status::Ok();
}

Result<VerifySlot> CudaBackend::NextVerifySlot() {
  std::size_t index = checks_.size();
  if (index / kVerifyChunkSlots == verify_chunks_.size()) {
    VerifyChunk chunk;
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&chunk.mismatches, kVerifyChunkSlots * sizeof(unsigned long long)));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&chunk.first_index, kVerifyChunkSlots * sizeof(unsigned long long)));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&chunk.first_value, kVerifyChunkSlots * sizeof(float)));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        cudaMemset(chunk.mismatches, 0, kVerifyChunkSlots * sizeof(unsigned long long)));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        cudaMemset(chunk.first_index, 0xff, kVerifyChunkSlots * sizeof(unsigned long long)));
    verify_chunks_.push_back(chunk);
  }
  const VerifyChunk& chunk = verify_chunks_[index / kVerifyChunkSlots];
  std::size_t at = index % kVerifyChunkSlots;
  return VerifySlot{chunk.mismatches + at, chunk.first_index + at, chunk.first_value + at};
}

Status CudaBackend::DoCompute(StreamId stream, Micros duration) {
  if (!deferred_.ok()) return Status::Ok();
  Result<cudaStream_t> s = StreamFor(stream);
  if (!s.ok()) return s.status();
  PendingSpan span{SpanKind::kCompute, stream, nullptr, nullptr};
  BUCKETSIM_RETURN_IF_ERROR(BeginSpan(*s, span));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(
      LaunchSpin(SpinCyclesFor(duration, options_.compute_scale, cycles_per_us_), *s));
  return EndSpan(*s, span);
}

Status CudaBackend::DoWaitStream(StreamId waiter, StreamId producer) {
  if (!deferred_.ok() || waiter == producer) return Status::Ok();
  Result<cudaStream_t> w = StreamFor(waiter);
  if (!w.ok()) return w.status();
  Result<cudaStream_t> p = StreamFor(producer);
  if (!p.ok()) return p.status();
  // stream.wait_stream(producer): an event at the producer's current end, waited on.
  Result<cudaEvent_t> event = NextEvent();
  if (!event.ok()) return event.status();
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(*event, *p));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(*w, *event, 0));
  return Status::Ok();
}

Status CudaBackend::WaitForStreams() {
  ArmedSection armed(watchdog_.get(), "waiting for the iteration's streams");
  // Polls instead of blocking, as nccl-tests' testStreamSynchronize does, so that an NCCL
  // failure reported asynchronously ends the wait.
  for (;;) {
    bool idle = true;
    for (cudaStream_t stream : streams_) {
      cudaError_t state = cudaStreamQuery(stream);
      if (state == cudaErrorNotReady) {
        idle = false;
      } else if (state != cudaSuccess) {
        return CudaStatus(state, "cudaStreamQuery");
      }
    }
    if (idle) return Status::Ok();
    if (timed_out_.load()) return DeviceError(timeout_message_);
    {
      std::lock_guard lock(comms_mutex_);
      for (auto& [id, communicator] : comms_) {
        if (communicator.comm == nullptr) continue;
        ncclResult_t async = ncclSuccess;
        BUCKETSIM_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(communicator.comm, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
          std::string call = "an NCCL operation of process group " + std::to_string(id);
          return NcclStatus(async, call.c_str());
        }
      }
    }
    std::this_thread::yield();
  }
}

Status CudaBackend::CollectVerification() {
  if (checks_.empty()) return Status::Ok();
  std::vector<unsigned long long> mismatches(checks_.size());
  std::vector<unsigned long long> first_index(checks_.size());
  std::vector<float> first_value(checks_.size());
  for (std::size_t begin = 0; begin < checks_.size(); begin += kVerifyChunkSlots) {
    const VerifyChunk& chunk = verify_chunks_[begin / kVerifyChunkSlots];
    std::size_t count = std::min(kVerifyChunkSlots, checks_.size() - begin);
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemcpy(mismatches.data() + begin, chunk.mismatches,
                                              count * sizeof(unsigned long long),
                                              cudaMemcpyDeviceToHost));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemcpy(first_index.data() + begin, chunk.first_index,
                                              count * sizeof(unsigned long long),
                                              cudaMemcpyDeviceToHost));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMemcpy(first_value.data() + begin, chunk.first_value,
                                              count * sizeof(float), cudaMemcpyDeviceToHost));
    // Ready for the next iteration.
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        cudaMemset(chunk.mismatches, 0, count * sizeof(unsigned long long)));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(
        cudaMemset(chunk.first_index, 0xff, count * sizeof(unsigned long long)));
  }
  std::uint64_t last_failed = std::numeric_limits<std::uint64_t>::max();
  for (std::size_t i = 0; i < checks_.size(); ++i) {
    if (mismatches[i] == 0) continue;
    const VerifyCheck& check = checks_[i];
    if (check.collective != last_failed) ++verify_failures_;
    last_failed = check.collective;
    if (!first_mismatch_.empty()) continue;
    first_mismatch_ = fmt::format(
        "collective of event {} (process group {}): {} element(s) of request {} wrong; first at "
        "column {}: got {}, expected {}",
        check.event, check.group, mismatches[i], check.slice.request,
        check.slice.offset + first_index[i], first_value[i],
        check.expectation.At(check.slice.request, check.first_j + first_index[i]));
  }
  checks_.clear();
  return Status::Ok();
}

Result<Micros> CudaBackend::SinceOrigin(cudaEvent_t event) const {
  float ms = 0;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, anchor_, event));
  return anchor_us_ + static_cast<Micros>(ms) * 1000.0;
}

Status CudaBackend::MoveAnchor() {
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventRecord(next_anchor_, streams_[0]));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(next_anchor_));
  Result<Micros> now = SinceOrigin(next_anchor_);
  if (!now.ok()) return now.status();
  anchor_us_ = *now;
  std::swap(anchor_, next_anchor_);
  return Status::Ok();
}

void CudaBackend::SampleDeviceMemory() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    device_used_peak_ = std::max<Bytes>(device_used_peak_, total_bytes - free_bytes);
  }
  // The pool's high-water mark catches a peak between samples: the memory in use before the
  // run plus the most the pool ever reserved.
  std::uint64_t reserved_high = 0;
  if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &reserved_high) ==
      cudaSuccess) {
    device_used_peak_ = std::max<Bytes>(device_used_peak_, device_used_before_ + reserved_high);
  }
}

Result<IterationSpans> CudaBackend::EndIteration() {
  if (!deferred_.ok()) return deferred_;
  BUCKETSIM_RETURN_IF_ERROR(Fatal(WaitForStreams()));
  BUCKETSIM_RETURN_IF_ERROR(Fatal(CollectVerification()));
  SampleDeviceMemory();
  IterationSpans finished{iteration_start_us_, iteration_start_us_, {}};
  finished.spans.reserve(spans_.size());
  for (const PendingSpan& span : spans_) {
    Result<Micros> start = SinceOrigin(span.start);
    if (!start.ok()) return start.status();
    Result<Micros> end = SinceOrigin(span.end);
    if (!end.ok()) return end.status();
    finished.spans.push_back({span.kind, span.stream, *start, *end});
    finished.end_us = std::max(finished.end_us, *end);
  }
  spans_.clear();
  next_event_ = 0;
  BUCKETSIM_RETURN_IF_ERROR(Fatal(MoveAnchor()));
  iteration_start_us_ = finished.end_us;
  return finished;
}

ExecutionFacts CudaBackend::facts() const {
  ExecutionFacts facts;
  facts.ranks = world_.size();
  facts.rank = world_.rank();
  facts.emulated = plan_.emulated;
  facts.emulation_note = plan_.note;
  facts.verified = options_.verify;
  facts.verified_collectives = verified_collectives_;
  facts.verify_failures = verify_failures_;
  facts.first_mismatch = first_mismatch_;
  facts.communicators = comms_.size();
  facts.materialized_peak_bytes = buffers_.peak_bytes();
  facts.device_used_before_bytes = device_used_before_;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    facts.device_used_after_bytes = total_bytes - free_bytes;
    facts.device_used_peak_bytes = std::max<Bytes>(device_used_peak_, total_bytes - free_bytes);
  } else {
    facts.device_used_peak_bytes = device_used_peak_;
  }
  return facts;
}

void CudaBackend::OnTimeout(const std::string& what) {
  timeout_message_ = fmt::format("timed out after {} s while {}; NCCL communicators aborted",
                                 options_.timeout_s, what);
  timed_out_.store(true);
  {
    // ncclCommAbort ends the communicator's pending kernels, so the streams can drain.
    std::lock_guard lock(comms_mutex_);
    for (auto& [id, communicator] : comms_) {
      if (communicator.comm == nullptr) continue;
      (void)ncclCommAbort(communicator.comm);
      communicator.comm = nullptr;
    }
  }
  if (options_.on_fatal) options_.on_fatal(timeout_message_);
}

}  // namespace

Result<std::unique_ptr<Backend>> MakeCudaBackend(MpiWorld& world,
                                                 const CudaBackendOptions& options) {
  // Collective first (every rank gets here), so a rank without a GPU does not strand the others.
  Result<NodePlace> node = world.NodeLocal();
  if (!node.ok()) return node.status();
  const int local_rank = node->local_rank;
  const int local_size = node->local_size;
  int devices = 0;
  if (cudaError_t code = cudaGetDeviceCount(&devices); code != cudaSuccess) {
    (void)cudaGetLastError();
    return DeviceError(fmt::format(
        "the cuda backend needs an NVIDIA GPU and driver: no usable CUDA device ({}: {})",
        cudaGetErrorName(code), cudaGetErrorString(code)));
  }
  if (devices == 0) return DeviceError("the cuda backend needs an NVIDIA GPU: no CUDA device");
  if (local_size > devices) {
    // NCCL refuses two ranks of one communicator on one GPU.
    return DeviceError(fmt::format(
        "{} ranks run on this node but it has {} GPU(s): the cuda backend runs one rank per GPU "
        "(start at most {} ranks per node, or one process to emulate the trace's world)",
        local_size, devices, devices));
  }
  int device = local_rank % devices;
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // creates the context now, not mid-run
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(world, options, device));
}

}  // namespace bucketsim
