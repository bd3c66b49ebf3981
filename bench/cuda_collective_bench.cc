// Reduce-scatter throughput through bucketsim's cuda backend next to a bare ncclReduceScatter
// loop on the same sizes, in the same run: the cost of the backend's bookkeeping (events around
// every span, the buffer table, the stream map) over NCCL itself. A plain timed sweep rather
// than Google Benchmark because it runs under mpirun with one process per GPU:
//   mpirun -np 8 build/bench/cuda_collective_bench        # 8 GPUs, real NCCL
//   build/bench/cuda_collective_bench                     # 1 GPU: emulated 8-rank group
// Sizes are whole send buffers, 1 KiB to 256 MiB, fp32; busbw and algbw as nccl-tests defines
// them (backend/span_timing.h). Without a usable GPU it prints why and exits 0.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/host/mpi_world.h"
#include "backend/span_timing.h"

namespace bucketsim {
namespace {

constexpr int kEmulatedRanks = 8;
constexpr int kWarmup = 5;
constexpr int kIterations = 20;

struct Row {
  Bytes send_bytes = 0;
  Micros backend_us = 0;
  Micros bare_us = 0;
};

// µs per reduce-scatter through the backend: from the first collective's start to the last
// one's end, over the iterations (the gaps between them are part of the backend's cost).
Result<Micros> TimeBackend(Backend& backend, const CollectiveRecord& record, StreamId stream) {
  constexpr BufferHandle kInput = 1;
  constexpr BufferHandle kOutput = 2;
  Bytes element = ElementSize(record.dtype);
  backend.Materialize(kInput, record.input_numel * element, stream);
  backend.Materialize(kOutput, record.output_numel * element, stream);
  CollectiveBuffers buffers{kInput, kOutput, {}};
  for (int i = 0; i < kWarmup; ++i) backend.Collective(record, buffers, stream);
  Result<IterationSpans> warm = backend.EndIteration();
  if (!warm.ok()) return warm.status();
  for (int i = 0; i < kIterations; ++i) backend.Collective(record, buffers, stream);
  Result<IterationSpans> timed = backend.EndIteration();
  backend.Release(kInput, stream);
  backend.Release(kOutput, stream);
  if (!timed.ok()) return timed.status();
  const auto& spans = timed->spans;
  return (spans.back().end_us - spans.front().start_us) / kIterations;
}

// The same reduce-scatters on a bare NCCL communicator (a world of one plus the local reduction
// when emulating), timed with two events around the loop, as nccl-tests does.
class BareLoop {
 public:
  Status Init(MpiWorld& world, bool emulated) {
    emulated_ = emulated;
    ncclUniqueId id{};
    if (world.rank() == 0) BUCKETSIM_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    if (!emulated) BUCKETSIM_RETURN_IF_ERROR(world.Broadcast(&id, sizeof(id)));
    int ranks = emulated ? 1 : world.size();
    int rank = emulated ? 0 : world.rank();
    BUCKETSIM_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comm_, ranks, id, rank));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&end_));
    return Status::Ok();
  }
  ~BareLoop() {
    if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
    if (start_ != nullptr) (void)cudaEventDestroy(start_);
    if (end_ != nullptr) (void)cudaEventDestroy(end_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  Result<Micros> Time(const CollectiveRecord& record) {
    void* input = nullptr;
    void* output = nullptr;
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMalloc(&input, record.input_numel * sizeof(float)));
    BUCKETSIM_CUDA_RETURN_IF_ERROR(cudaMalloc(&output, record.output_numel * sizeof(float)));
    Status status = Loop(record, input, output, kWarmup);
    float ms = 0;
    if (status.ok()) status = CudaOk(cudaEventRecord(start_, stream_), "cudaEventRecord");
    if (status.ok()) status = Loop(record, input, output, kIterations);
    if (status.ok()) status = CudaOk(cudaEventRecord(end_, stream_), "cudaEventRecord");
    if (status.ok()) status = CudaOk(cudaEventSynchronize(end_), "cudaEventSynchronize");
    if (status.ok())
      status = CudaOk(cudaEventElapsedTime(&ms, start_, end_), "cudaEventElapsedTime");
    (void)cudaFree(input);
    (void)cudaFree(output);
    if (!status.ok()) return status;
    return static_cast<Micros>(ms) * 1000.0 / kIterations;
  }

 private:
  static Status CudaOk(cudaError_t code, const char* call) {
    return code == cudaSuccess ? Status::Ok() : CudaStatus(code, call);
  }
  Status Loop(const CollectiveRecord& record, void* input, void* output, int count) {
    for (int i = 0; i < count; ++i) {
      if (emulated_) {
        BUCKETSIM_NCCL_RETURN_IF_ERROR(ncclReduceScatter(input, input, record.input_numel,
                                                         ncclFloat32, ncclSum, comm_, stream_));
        BUCKETSIM_CUDA_RETURN_IF_ERROR(LaunchReduceRows(
            input, output, ReduceType::kFloat32, record.group_size, record.output_numel, stream_));
      } else {
        BUCKETSIM_NCCL_RETURN_IF_ERROR(ncclReduceScatter(input, output, record.output_numel,
                                                         ncclFloat32, ncclSum, comm_, stream_));
      }
    }
    return Status::Ok();
  }
  bool emulated_ = false;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t end_ = nullptr;
};

int Run() {
  Result<std::unique_ptr<MpiWorld>> world = MpiWorld::Init();
  if (!world.ok()) {
    std::printf("cuda_collective_bench: skipped: %s\n", world.status().ToString().c_str());
    return 0;
  }
  MpiWorld& mpi = **world;
  CudaBackendOptions options;
  options.verify = false;  // a timing run, as --no-verify
  Result<std::unique_ptr<Backend>> backend = MakeCudaBackend(mpi, options);
  if (!backend.ok()) {
    if (mpi.rank() == 0) {
      std::printf("cuda_collective_bench: skipped: %s\n", backend.status().ToString().c_str());
    }
    return 0;
  }
  bool emulated = mpi.size() == 1;
  int ranks = emulated ? kEmulatedRanks : mpi.size();
  TraceHeader header;
  header.world_size = ranks;
  header.rank = mpi.rank();
  header.streams = {{"default"}, {"post_backward"}};
  ProcessGroup all{1, {}, "world"};
  for (int r = 0; r < ranks; ++r) all.ranks.push_back(r);
  header.groups.push_back(all);
  Status status = header.Finalize();
  if (status.ok()) status = (*backend)->Start(header);
  BareLoop bare;
  if (status.ok()) status = bare.Init(mpi, emulated);
  std::vector<Row> rows;
  for (Bytes send = kKiB; status.ok() && send <= 256 * kMiB; send *= 4) {
    Numel output_numel = std::max<Numel>(send / sizeof(float) / ranks, 1);
    CollectiveRecord record{CollectiveKind::kBypass,
                            1,
                            ranks,
                            DType::kFloat32,
                            output_numel * ranks,
                            output_numel,
                            1,
                            0,
                            0,
                            0};
    Result<Micros> through_backend = TimeBackend(**backend, record, header.post_backward_stream());
    if (!through_backend.ok()) {
      status = through_backend.status();
      break;
    }
    Result<Micros> through_nccl = bare.Time(record);
    if (!through_nccl.ok()) {
      status = through_nccl.status();
      break;
    }
    rows.push_back({record.input_numel * sizeof(float), *through_backend, *through_nccl});
  }
  if (!status.ok()) {
    std::fprintf(stderr, "cuda_collective_bench: rank %d: %s\n", mpi.rank(),
                 status.ToString().c_str());
    return 1;
  }
  if (mpi.rank() != 0) return 0;
  std::printf("# reduce-scatter, fp32, %d ranks%s, %d iterations after %d warm-up\n", ranks,
              emulated ? " EMULATED on one GPU (NCCL world of one + local reduction)" : "",
              kIterations, kWarmup);
  std::printf("%12s %14s %14s %16s %16s %8s\n", "size_B", "bucketsim_us", "nccl_us",
              "bucketsim_busbw", "nccl_busbw", "ratio");
  for (const Row& row : rows) {
    double ours = BusBandwidthGBps(row.send_bytes, row.backend_us, ranks);
    double theirs = BusBandwidthGBps(row.send_bytes, row.bare_us, ranks);
    std::printf("%12llu %14.2f %14.2f %16.2f %16.2f %8.3f\n",
                static_cast<unsigned long long>(row.send_bytes), row.backend_us, row.bare_us, ours,
                theirs, theirs > 0 ? ours / theirs : 0.0);
  }
  return 0;
}

}  // namespace
}  // namespace bucketsim

int main() { return bucketsim::Run(); }
