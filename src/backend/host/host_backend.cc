#include "backend/host/host_backend.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backend/element_convert.h"
#include "backend/host/group_communicators.h"
#include "backend/host/mpi_check.h"
#include "backend/host/peer_watch.h"
#include "backend/host/stall_detector.h"
#include "backend/host/stream_worker.h"
#include "backend/slice_check.h"
#include "backend/verify_pattern.h"

namespace bucketsim {

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

namespace {

// Element access by dtype, through float: the pattern's values are small integers.
float Load(const std::byte* data, DType dtype, Numel index) {
  switch (dtype) {
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, data + index * 8, 8);
      return static_cast<float>(v);
    }
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, data + index * 4, 4);
      return v;
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      std::uint16_t bits;
      std::memcpy(&bits, data + index * 2, 2);
      return dtype == DType::kFloat16 ? Fp16ToFloat(bits) : Bf16ToFloat(bits);
    }
    default:
      return 0;
  }
}

void Store(std::byte* data, DType dtype, Numel index, float value) {
  switch (dtype) {
    case DType::kFloat64: {
      double v = value;
      std::memcpy(data + index * 8, &v, 8);
      return;
    }
    case DType::kFloat32:
      std::memcpy(data + index * 4, &value, 4);
      return;
    case DType::kFloat16:
    case DType::kBFloat16: {
      std::uint16_t bits = dtype == DType::kFloat16 ? FloatToFp16(value) : FloatToBf16(value);
      std::memcpy(data + index * 2, &bits, 2);
      return;
    }
    default:
      return;
  }
}

bool Reducible(DType dtype) {
  return dtype == DType::kFloat64 || dtype == DType::kFloat32 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

// Largest integer up to which every integer is exact, and the significand bits.
struct Precision {
  double exact_limit;
  int bits;
};
Precision PrecisionOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return {9007199254740992.0, 53};
    case DType::kFloat16:
      return {2048, 11};
    case DType::kBFloat16:
      return {256, 8};
    default:
      return {16777216.0, 24};
  }
}

// MPI user reductions for the 16-bit formats MPI has no type for: sum through float, round to
// nearest even, as NCCL's half and bfloat16 sums round each partial sum.
template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void Sum16(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) b[i] = FromFloat(ToFloat(a[i]) + ToFloat(b[i]));
}

// A compute span stands for a kernel: the device is busy, the host is not. The worker sleeps
// until shortly before the span ends and spins only the rest, so the time stays exact (a wake-up
// is late by tens of microseconds) while the core stays free for the communication thread: on a
// machine with a core per rank, a span that spun throughout would take the core from the
// reduce-scatter it is meant to overlap, and the replay would measure the CPU, not the overlap.
void WaitUntil(StreamWorker::Clock::time_point until) {
  constexpr auto kSpinMargin = std::chrono::microseconds(200);
  if (until - StreamWorker::Clock::now() > kSpinMargin) {
    std::this_thread::sleep_until(until - kSpinMargin);
  }
  while (StreamWorker::Clock::now() < until) {
  }
}

// "; every peer still answers, rank 3 is furthest behind (at event 27)": who a collective that
// outlives --timeout may be waiting for, when a peer's replay is behind this rank's (`mine`).
std::string FurthestBehind(const std::vector<PeerWatch::Peer>& peers,
                           std::optional<EventIndex> mine) {
  // Events + 1, so that "before its first collective" (0) is behind every event.
  auto reached = [](std::optional<EventIndex> event) { return event ? *event + 1 : 0; };
  const PeerWatch::Peer* behind = nullptr;
  for (const PeerWatch::Peer& p : peers) {
    if (p.finished || reached(p.event) >= reached(mine)) continue;
    if (behind == nullptr || reached(p.event) < reached(behind->event)) behind = &p;
  }
  if (behind == nullptr) return "; every peer still answers";
  return fmt::format("; every peer still answers, rank {} is furthest behind ({})", behind->rank,
                     behind->event ? fmt::format("at event {}", *behind->event)
                                   : std::string("before its first collective"));
}

}  // namespace

struct HostBackend::Worker {
  explicit Worker(std::string name) : stream(std::move(name)) {}
  StreamWorker stream;
  std::vector<TimedSpan> spans;  // written by the worker's thread; read after it drained
  // Without verification, what a gradient fill copies from (zeros; grown on the worker's thread).
  std::vector<std::byte> fill_source;
  // A framework collective's memory where its trace allocation is not materialized.
  std::vector<std::byte> scratch;
  // The stream's last compute span: its operation's ticket and its emulated end.
  std::uint64_t last_compute_ticket = 0;
  StreamWorker::Clock::time_point last_compute_end{};
};

HostBackend::HostBackend(MpiWorld& world, HostBackendOptions options)
    : world_(world),
      options_(std::move(options)),
      epoch_(StreamWorker::Clock::now()),
      communicators_(world.rank()) {}

HostBackend::~HostBackend() {
  stopping_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  workers_.clear();  // drains every queue before the communicators go
  if (fp16_sum_ != MPI_OP_NULL) MPI_Op_free(&fp16_sum_);
  if (bf16_sum_ != MPI_OP_NULL) MPI_Op_free(&bf16_sum_);
}

Status HostBackend::Start(const TraceHeader& header) {
  header_ = &header;
  if (world_.size() != header.world_size) {
    if (world_.size() != 1) {
      return InvalidArgument(fmt::format(
          "the trace was recorded at world size {} but this job has {} ranks: run it with "
          "'mpirun -np {}', or on one process to emulate its collectives",
          header.world_size, world_.size(), header.world_size));
    }
    emulated_ = true;
    emulation_note_ = fmt::format(
        "the trace's world size is {} but the job has 1 rank: each reduce-scatter reduces its "
        "{} rows locally (the same bytes read and reduced, nothing communicated)",
        header.world_size, header.world_size);
  } else {
    for (const ProcessGroup& group : header.groups) {
      Result<int> position = GroupPosition(group, world_.rank());
      if (!position.ok()) return position.status();
    }
  }
  BUCKETSIM_MPI_RETURN_IF_ERROR(
      MPI_Op_create(&Sum16<&Fp16ToFloat, &FloatToFp16>, /*commute=*/1, &fp16_sum_));
  BUCKETSIM_MPI_RETURN_IF_ERROR(
      MPI_Op_create(&Sum16<&Bf16ToFloat, &FloatToBf16>, /*commute=*/1, &bf16_sum_));
  std::size_t streams = std::max<std::size_t>(header.streams.size(), 1);
  for (std::size_t s = 0; s < streams; ++s) {
    workers_.push_back(std::make_unique<Worker>(
        s < header.streams.size() ? header.streams[s].name : fmt::format("stream {}", s)));
  }
  epoch_ = StreamWorker::Clock::now();
  if (options_.timeout_s > 0) watchdog_ = std::thread([this] { WatchdogLoop(); });
  return Status::Ok();
}

HostBackend::Worker& HostBackend::WorkerFor(StreamId stream) {
  // The reader rejects events on undeclared streams; a header without streams has one.
  return *workers_[stream < workers_.size() ? stream : 0];
}

Micros HostBackend::Now() const { return Since(StreamWorker::Clock::now()); }

Micros HostBackend::Since(StreamWorker::Clock::time_point when) const {
  return std::chrono::duration<double, std::micro>(when - epoch_).count();
}

void HostBackend::Fatal(const std::string& message) {
  {
    std::lock_guard lock(failure_mutex_);
    if (fatal_.ok()) fatal_ = DeviceError(message);
  }
  if (options_.on_fatal) options_.on_fatal(message);
}

void HostBackend::Track(std::int64_t delta_bytes) {
  std::int64_t now = materialized_bytes_ += delta_bytes;
  std::int64_t peak = materialized_peak_bytes_.load();
  while (now > peak && !materialized_peak_bytes_.compare_exchange_weak(peak, now)) {
  }
}

std::byte* HostBackend::Data(BufferHandle buffer) const {
  auto it = buffers_.find(buffer);
  return it == buffers_.end() ? nullptr : it->second.memory.get();
}

void HostBackend::Materialize(BufferHandle buffer, Bytes bytes, StreamId /*stream*/) {
  // Memory is taken in host order, when the program asks for it, as PyTorch's allocator does;
  // what the stream does with it comes later, in stream order.
  if ((buffer & kTraceBufferBit) && !options_.materialize_all) return;
  std::unique_ptr<std::byte[]> memory(new (std::nothrow) std::byte[std::max<Bytes>(bytes, 1)]);
  if (!memory) {
    Fatal(fmt::format("cannot allocate {} bytes of host memory for {}", bytes,
                      buffer & kTraceBufferBit ? "a trace allocation" : "a policy buffer"));
    return;
  }
  // Touched, so the pages are really the process's; zeros, as fairscale allocates its buckets.
  std::memset(memory.get(), 0, bytes);
  buffers_[buffer] = {std::move(memory), bytes};
  Track(static_cast<std::int64_t>(bytes));
}

void HostBackend::Release(BufferHandle buffer, StreamId stream) {
  auto it = buffers_.find(buffer);
  if (it == buffers_.end()) return;
  OwnedBuffer owned = std::move(it->second);
  buffers_.erase(it);
  if (buffer & kTraceBufferBit) {
    Track(-static_cast<std::int64_t>(owned.bytes));
    return;
  }
  // The stream may still have work queued on it: the memory goes once that work is done, as
  // the caching allocator reuses a block only in the order of the stream it was used on.
  auto shared = std::make_shared<OwnedBuffer>(std::move(owned));
  WorkerFor(stream).stream.Enqueue("releasing a buffer", [this, shared] {
    shared->memory.reset();
    Track(-static_cast<std::int64_t>(shared->bytes));
  });
}

void HostBackend::FillGradient(const GradientFill& fill, StreamId stream) {
  Worker& worker = WorkerFor(stream);
  worker.stream.Enqueue(
      fmt::format("stacking the gradient of event {}", fill.request),
      [this, fill, data = Data(fill.buffer), &worker] {
        if (data == nullptr) return Fatal("gradient fill into a buffer that does not exist");
        if (!Reducible(fill.dtype)) {
          return Fatal(fmt::format("event {}: the host backend cannot reduce {} gradients",
                                   fill.request, DTypeName(fill.dtype)));
        }
        // torch.stack / torch.cat is a copy of every byte. With verification the bytes are the
        // pattern, computed element by element (several times slower than a copy: time runs
        // with --no-verify); without, they are copied from a source of the same size, so the
        // span costs what the copy costs.
        const Bytes element = ElementSize(fill.dtype);
        const Bytes row_bytes = fill.numel * element;
        if (!options_.verify && worker.fill_source.size() < row_bytes) {
          worker.fill_source.resize(row_bytes);
        }
        Micros start = Now();
        for (int row = 0; row < fill.rows; ++row) {
          const Numel first = fill.offset + row * fill.RowStride();
          if (!options_.verify) {
            std::memcpy(data + first * element, worker.fill_source.data(), row_bytes);
            continue;
          }
          for (Numel j = 0; j < fill.numel; ++j) {
            Store(data, fill.dtype, first + j, PatternValue(world_.rank(), fill.request, row, j));
          }
        }
        worker.spans.push_back({SpanKind::kCopy, 0, start, Now()});
      });
}

void HostBackend::Copy(const BufferCopy& copy, StreamId stream) {
  Worker& worker = WorkerFor(stream);
  worker.stream.Enqueue(
      "copying bucket columns", [this, copy, dst = Data(copy.dst), src = Data(copy.src), &worker] {
        if (dst == nullptr || src == nullptr)
          return Fatal("copy between buffers that do not exist");
        Bytes element = ElementSize(copy.dtype);
        Micros start = Now();
        for (int r = 0; r < copy.rows; ++r) {
          std::memcpy(dst + (r * copy.dst_row_numel + copy.dst_col) * element,
                      src + (r * copy.src_row_numel + copy.src_col) * element, copy.cols * element);
        }
        worker.spans.push_back({SpanKind::kCopy, 0, start, Now()});
      });
}

// Waits until collective `first` is next, and passes the turn on to `first + count` when it
// goes out of scope, whatever the collective's outcome.
class HostBackend::Turn {
 public:
  Turn(HostBackend& backend, std::uint64_t first, std::uint64_t count)
      : backend_(backend), next_(first + count) {
    std::unique_lock lock(backend_.turn_mutex_);
    backend_.turn_cv_.wait(lock, [&] { return backend_.next_turn_ == first; });
  }
  ~Turn() {
    {
      std::lock_guard lock(backend_.turn_mutex_);
      backend_.next_turn_ = next_;
    }
    backend_.turn_cv_.notify_all();
  }
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

 private:
  HostBackend& backend_;
  std::uint64_t next_;
};

void HostBackend::Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers,
                             StreamId stream) {
  Worker& worker = WorkerFor(stream);
  std::vector<ReducedSlice> slices(buffers.slices.begin(), buffers.slices.end());
  const std::uint64_t index = collectives_issued_;
  collectives_issued_ += record.replicate_group ? 2 : 1;
  if (options_.peers != nullptr) options_.peers->Progress(record.event_index);
  const Bytes element = ElementSize(record.dtype);
  worker.stream.Enqueue(
      fmt::format("collective #{} ({} of {} bytes on group {}, event {})", index,
                  CollectiveKindName(record.kind), SendBytes(record), record.group,
                  record.event_index),
      [this, record, in = Data(buffers.input), out = Data(buffers.output),
       in_place = buffers.input == buffers.output, offset = buffers.input_offset,
       framework = buffers.framework, slices = std::move(slices), index, element, &worker] {
        const Turn turn(*this, index, record.replicate_group ? 2 : 1);
        if (framework) {
          // The trace's own allocation: its memory, or scratch of its size.
          std::byte* data = in;
          if (data == nullptr) {
            const Numel numel = std::max(record.input_numel, record.output_numel);
            if (worker.scratch.size() < numel * element) worker.scratch.resize(numel * element);
            data = worker.scratch.data();
          }
          return RunFrameworkCollective(record, data + offset * element, index, worker);
        }
        if (in == nullptr || out == nullptr) {
          return Fatal("collective on buffers that do not exist");
        }
        std::byte* input = in + offset * element;
        RunCollective(record, input, in_place ? input : out, in_place, slices, index, worker);
      });
}

// The MPI type a dtype's elements travel as, and the sum over it (fp16 and bf16: our own ops).
MPI_Datatype HostBackend::MpiType(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kFloat16:
    case DType::kBFloat16:
      return MPI_UINT16_T;
    default:
      return MPI_FLOAT;
  }
}

MPI_Op HostBackend::MpiSum(DType dtype) const {
  if (dtype == DType::kFloat16) return fp16_sum_;
  if (dtype == DType::kBFloat16) return bf16_sum_;
  return MPI_SUM;
}

void HostBackend::RunCollective(const CollectiveRecord& record, std::byte* in, std::byte* out,
                                bool in_place, const std::vector<ReducedSlice>& slices,
                                std::uint64_t index, Worker& worker) {
  const ProcessGroup* group = header_->FindGroup(record.group);
  if (group == nullptr)
    return Fatal(fmt::format("reduce-scatter on unknown group {}", record.group));
  if (!Reducible(record.dtype)) {
    return Fatal(fmt::format("event {}: the host backend cannot reduce {} data", record.event_index,
                             DTypeName(record.dtype)));
  }
  const Numel count = record.output_numel;
  const bool all_reduce = record.kind == CollectiveKind::kAllReduce;
  const Bytes element = ElementSize(record.dtype);
  // In place (NCCL's definition): a reduce-scatter's shard lands in its own range of the input.
  // MPI's in-place form puts it at the start instead, so the shard is reduced into scratch and
  // copied to where NCCL would have written it.
  std::vector<std::byte> scratch;
  std::byte* shard = out;
  if (in_place && !all_reduce) {
    scratch.resize(count * element);
    shard = scratch.data();
  }
  Micros start = 0;
  if (emulated_) {
    // A world of one standing in for the group: read and reduce the same rows locally. An
    // all-reduce of one rank is its input: nothing to reduce, nothing to move.
    start = Now();
    if (!all_reduce) {
      for (Numel j = 0; j < count; ++j) {
        float sum = 0;
        for (int r = 0; r < record.group_size; ++r) sum += Load(in, record.dtype, r * count + j);
        Store(shard, record.dtype, j, sum);
      }
    } else if (!in_place) {
      std::memcpy(out, in, count * element);
    }
  } else {
    Result<MPI_Comm> comm = communicators_.Get(*group);
    if (!comm.ok()) return Fatal(comm.status().message());
    if (count > static_cast<Numel>(INT_MAX)) {
      return Fatal(fmt::format("event {}: {} elements per rank exceed one MPI call's int count",
                               record.event_index, count));
    }
    const MPI_Datatype type = MpiType(record.dtype);
    const MPI_Op op = MpiSum(record.dtype);
    start = Now();
    int code = MPI_SUCCESS;
    if (all_reduce) {
      code = MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, static_cast<int>(count), type, op,
                           *comm);
    } else {
      code = MPI_Reduce_scatter_block(in, shard, static_cast<int>(count), type, op, *comm);
    }
    if (code != MPI_SUCCESS) {
      return Fatal(fmt::format(
          "event {}: {}", record.event_index,
          MpiStatus(code, all_reduce ? "MPI_Allreduce" : "MPI_Reduce_scatter_block").message()));
    }
  }
  if (shard != out) {
    const int position = emulated_ ? 0 : *GroupPosition(*group, world_.rank());
    out = in + position * count * element;
    std::memcpy(out, shard, count * element);
  }
  worker.spans.push_back({SpanKind::kCollective, 0, start, Now(), index});
  if (record.replicate_group) {
    // HYBRID_SHARD: the shard is then summed over the rank's replicas, in place (a world of one
    // standing in for them has nothing to sum).
    start = Now();
    if (!emulated_) {
      const ProcessGroup* replicas = header_->FindGroup(*record.replicate_group);
      Result<MPI_Comm> comm = communicators_.Get(*replicas);
      if (!comm.ok()) return Fatal(comm.status().message());
      const int code = MPI_Allreduce(MPI_IN_PLACE, out, static_cast<int>(count),
                                     MpiType(record.dtype), MpiSum(record.dtype), *comm);
      if (code != MPI_SUCCESS) {
        return Fatal(fmt::format("event {}: {}", record.event_index,
                                 MpiStatus(code, "MPI_Allreduce").message()));
      }
    }
    worker.spans.push_back({SpanKind::kCollective, 0, start, Now(), index + 1});
  }
  if (!options_.verify) return;
  Verify(record, slices, out);  // the replicas' sum too, when there is one
  if (record.replicate_group) ++verified_collectives_;
}

// An all-gather of this rank's part into the whole buffer, in place, or an all-reduce of the
// buffer, in place; this rank's part filled with the event's pattern first (core/buffer_ops.h).
void HostBackend::RunFrameworkCollective(const CollectiveRecord& record, std::byte* data,
                                         std::uint64_t index, Worker& worker) {
  const ProcessGroup* group = header_->FindGroup(record.group);
  if (group == nullptr) return Fatal(fmt::format("collective on unknown group {}", record.group));
  if (!Reducible(record.dtype)) {
    return Fatal(fmt::format("event {}: the host backend cannot hold {} data", record.event_index,
                             DTypeName(record.dtype)));
  }
  const bool all_gather = record.kind == CollectiveKind::kAllGather;
  const Numel count = record.input_numel;
  const Bytes element = ElementSize(record.dtype);
  const int position = emulated_ ? 0 : *GroupPosition(*group, world_.rank());
  std::byte* mine = all_gather ? data + position * count * element : data;
  for (Numel j = 0; options_.verify && j < count; ++j) {
    Store(mine, record.dtype, j, PatternValue(world_.rank(), record.event_index, 0, j));
  }
  const Micros start = Now();
  if (emulated_) {
    // A world of one standing in for the group: every part is this rank's own.
    for (int p = 0; all_gather && p < record.group_size; ++p) {
      if (p != position) std::memcpy(data + p * count * element, mine, count * element);
    }
  } else {
    Result<MPI_Comm> comm = communicators_.Get(*group);
    if (!comm.ok()) return Fatal(comm.status().message());
    if (count * element > static_cast<Numel>(INT_MAX)) {
      return Fatal(fmt::format("event {}: {} bytes per rank exceed one MPI call's int count",
                               record.event_index, count * element));
    }
    const int code = all_gather ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data,
                                                static_cast<int>(count * element), MPI_BYTE, *comm)
                                : MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                                                MpiType(record.dtype), MpiSum(record.dtype), *comm);
    if (code != MPI_SUCCESS) {
      return Fatal(
          fmt::format("event {}: {}", record.event_index,
                      MpiStatus(code, all_gather ? "MPI_Allgather" : "MPI_Allreduce").message()));
    }
  }
  worker.spans.push_back({SpanKind::kCollective, 0, start, Now(), index});
  if (!options_.verify) return;
  // An all-reduce is checked as a policy's is: one request, the event's, in row 0.
  if (!all_gather) return Verify(record, {{record.event_index, 0, count}}, data);
  // After an all-gather the part at position p is member p's pattern, copied exactly.
  ++verified_collectives_;
  for (int p = 0; p < record.group_size; ++p) {
    const int member = emulated_ ? world_.rank() : group->ranks[p];
    for (Numel j = 0; j < count; ++j) {
      const float want = PatternValue(member, record.event_index, 0, j);
      const float got = Load(data, record.dtype, p * count + j);
      if (got == want) continue;
      return Mismatch(
          fmt::format("all_gather of event {} on group {}: element {} is {}, expected {}",
                      record.event_index, record.group, p * count + j, got, want));
    }
  }
}

void HostBackend::Verify(const CollectiveRecord& record, const std::vector<ReducedSlice>& slices,
                         const std::byte* output) {
  const ProcessGroup& group = *header_->FindGroup(record.group);
  PatternExpectation expect;
  expect.members = group.size();
  expect.rank = world_.rank();
  expect.emulated = emulated_;
  expect.rank_term_sum = 0;
  for (int member : group.ranks) expect.rank_term_sum += PatternRankTerm(member);
  if (!emulated_) expect.position = *GroupPosition(group, world_.rank());
  if (record.replicate_group && !emulated_) {
    // Then summed over the replicas, each at this position of its own shard group: a 2-D mesh
    // of shard groups by replicas covers the world once, so every rank's term is in the sum.
    const int replicas = header_->FindGroup(*record.replicate_group)->size();
    expect.members *= replicas;
    expect.rank_term_sum = 0;
    for (int r = 0; r < world_.size(); ++r) expect.rank_term_sum += PatternRankTerm(r);
  }
  // Exact while the largest sum (8 per member) is an exact integer of the dtype; beyond that,
  // the rounding of each of the members' partial sums.
  Precision precision = PrecisionOf(record.dtype);
  bool exact = 8.0 * expect.members <= precision.exact_limit;
  double relative = expect.members * std::ldexp(1.0, -precision.bits + 1);
  for (const ReducedSlice& given : slices) {
    const SliceCheck check = CheckOfSlice(record, given, expect);
    const ReducedSlice& slice = check.output;
    for (Numel j = 0; j < slice.numel; ++j) {
      float want = check.expectation.At(slice.request, check.first_j + j);
      float got = Load(output, record.dtype, slice.offset + j);
      bool ok = exact ? got == want : std::abs(got - want) <= relative * want;
      if (ok) continue;
      ++verified_collectives_;
      return Mismatch(fmt::format(
          "{} of event {} on group {}: element {} of request event {} is {}, expected {}",
          CollectiveKindName(record.kind), record.event_index, record.group, check.first_j + j,
          slice.request, got, want));
    }
  }
  ++verified_collectives_;
}

// A collective's output was wrong: counted, and the first one described.
void HostBackend::Mismatch(std::string message) {
  ++verify_failures_;
  std::lock_guard lock(failure_mutex_);
  if (first_mismatch_.empty()) first_mismatch_ = std::move(message);
}

void HostBackend::Compute(StreamId stream, Micros duration) {
  Worker& worker = WorkerFor(stream);
  const auto length = std::chrono::duration_cast<StreamWorker::Clock::duration>(
      std::chrono::duration<double, std::micro>(duration * options_.compute_scale));
  const auto issued_at = StreamWorker::Clock::now();
  const std::uint64_t ticket = worker.stream.issued() + 1;
  worker.stream.Enqueue(
      fmt::format("a compute span of {:.0f} us", duration * options_.compute_scale),
      [this, length, issued_at, ticket, &worker] {
        // A device runs a queued kernel the moment the one before it ends, whenever the host
        // thread gets to it: a span that follows a compute span on this stream starts at that
        // span's end (or at its issue, if later), not when this thread was scheduled again. On
        // a core shared with a polling MPI thread the thread may wait milliseconds for the CPU,
        // which no GPU stream does.
        auto begin = StreamWorker::Clock::now();
        if (worker.last_compute_ticket + 1 == ticket) {
          begin = std::max(issued_at, std::min(begin, worker.last_compute_end));
        }
        const auto end = begin + length;
        WaitUntil(end);
        worker.last_compute_ticket = ticket;
        worker.last_compute_end = end;
        worker.spans.push_back({SpanKind::kCompute, 0, Since(begin), Since(end)});
      });
}

void HostBackend::WaitStream(StreamId waiter, StreamId producer) {
  if (waiter == producer) return;
  Worker& source = WorkerFor(producer);
  std::uint64_t ticket = source.stream.issued();
  if (ticket == 0) return;
  WorkerFor(waiter).stream.Enqueue(fmt::format("waiting for stream '{}'", source.stream.name()),
                                   [&source, ticket] { source.stream.WaitFor(ticket); });
}

Result<IterationSpans> HostBackend::EndIteration() {
  IterationSpans finished;
  for (auto& worker : workers_) worker->stream.WaitFor(worker->stream.issued());
  finished.start_us = iteration_start_us_;
  finished.end_us = Now();
  iteration_start_us_ = finished.end_us;
  for (std::size_t s = 0; s < workers_.size(); ++s) {
    for (TimedSpan span : workers_[s]->spans) {
      span.stream = static_cast<StreamId>(s);
      finished.spans.push_back(span);
    }
    workers_[s]->spans.clear();
  }
  std::lock_guard lock(failure_mutex_);
  if (!fatal_.ok()) return fatal_;
  return finished;
}

ExecutionFacts HostBackend::facts() const {
  ExecutionFacts facts;
  facts.ranks = world_.size();
  facts.rank = world_.rank();
  facts.emulated = emulated_;
  facts.emulation_note = emulation_note_;
  facts.verified = options_.verify;
  facts.verified_collectives = verified_collectives_;
  facts.verify_failures = verify_failures_;
  {
    std::lock_guard lock(failure_mutex_);
    facts.first_mismatch = first_mismatch_;
  }
  facts.communicators = communicators_.created();
  facts.materialized_peak_bytes = static_cast<Bytes>(materialized_peak_bytes_.load());
  return facts;
}

void HostBackend::WatchdogLoop() {
  using std::chrono::duration;
  StallDetector stall(StallDetector::LimitFor(options_.timeout_s));
  StreamWorker::Clock::time_point resumed;  // the end of this rank's last stall, if any
  while (!stopping_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto now = StreamWorker::Clock::now();
    // This rank was stalled: spans are timed from now (stall_detector.h).
    if (stall.Stalled(now)) resumed = now;
    for (const auto& worker : workers_) {
      std::optional<StreamWorker::Busy> busy = worker->stream.busy();
      // A wait is as old as what it waits for, which is checked on its own worker.
      if (!busy || busy->what.starts_with("waiting")) continue;
      double running_s = duration<double>(now - std::max(busy->since, resumed)).count();
      if (running_s <= options_.timeout_s) continue;
      std::string peers;
      // A collective waits for its peers; anything else (a compute span, a copy) is this rank's.
      if (options_.peers != nullptr && busy->what.starts_with("reduce-scatter")) {
        std::vector<PeerWatch::Peer> state = options_.peers->Peers();
        // A peer that stopped answering is why: the watch reports it, by name, once its
        // silence reaches the deadline.
        if (std::any_of(state.begin(), state.end(), [this](const PeerWatch::Peer& p) {
              return p.silent_s > options_.peers->missed_s();
            })) {
          continue;
        }
        peers = FurthestBehind(state, options_.peers->progress());
      }
      Fatal(fmt::format("timeout: {} on stream '{}' has run for {:.1f} s (--timeout {} s){}",
                        busy->what, worker->stream.name(), running_s, options_.timeout_s, peers));
      return;
    }
  }
}

Result<std::unique_ptr<Backend>> MakeHostBackend(MpiWorld& world, HostBackendOptions options) {
  return std::unique_ptr<Backend>(std::make_unique<HostBackend>(world, std::move(options)));
}

}  // namespace bucketsim
