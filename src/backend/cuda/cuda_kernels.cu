#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "backend/cuda/cuda_kernels.h"

namespace bucketsim {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 4096;  // grid-stride loops cover the rest

unsigned BlocksFor(std::uint64_t elements) {
  std::uint64_t blocks = (elements + kThreads - 1) / kThreads;
  if (blocks == 0) return 1;
  return blocks < kMaxBlocks ? static_cast<unsigned>(blocks) : kMaxBlocks;
}

// Element access by type: the accumulator is float for the 16-bit types and fp32, double for fp64.
template <typename T>
struct Element;
template <>
struct Element<__half> {
  using Acc = float;
  __device__ static float Load(const __half* p) { return __half2float(*p); }
  __device__ static void Store(__half* p, float v) { *p = __float2half_rn(v); }
};
template <>
struct Element<__nv_bfloat16> {
  using Acc = float;
  __device__ static float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  __device__ static void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
};
template <>
struct Element<float> {
  using Acc = float;
  __device__ static float Load(const float* p) { return *p; }
  __device__ static void Store(float* p, float v) { *p = v; }
};
template <>
struct Element<double> {
  using Acc = double;
  __device__ static double Load(const double* p) { return *p; }
  __device__ static void Store(double* p, double v) { *p = v; }
};

template <typename T>
__global__ void FillKernel(T* buffer, int rows, std::uint64_t numel, std::uint64_t row_stride,
                           std::uint64_t request, int rank) {
  std::uint64_t total = static_cast<std::uint64_t>(rows) * numel;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    int row = static_cast<int>(i / numel);
    std::uint64_t j = i % numel;
    Element<T>::Store(buffer + row * row_stride + j, PatternValue(rank, request, row, j));
  }
}

template <typename T>
__global__ void ReduceRowsKernel(const T* input, T* output, int rows, std::uint64_t numel) {
  for (std::uint64_t j = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       j < numel; j += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    typename Element<T>::Acc sum = 0;
    for (int r = 0; r < rows; ++r) sum += Element<T>::Load(input + r * numel + j);
    Element<T>::Store(output + j, sum);
  }
}

template <typename T>
__global__ void VerifyKernel(const T* output, std::uint64_t numel, std::uint64_t first_j,
                             std::uint64_t request, PatternExpectation expectation,
                             VerifySlot slot) {
  for (std::uint64_t j = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       j < numel; j += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    // The expected sum as the type stores it: exact while it fits the type's significand.
    T expected_element;
    Element<T>::Store(&expected_element, expectation.At(request, first_j + j));
    if (Element<T>::Load(output + j) != Element<T>::Load(&expected_element)) {
      atomicAdd(slot.mismatches, 1ull);
      atomicMin(slot.first_index, static_cast<unsigned long long>(j));
    }
  }
}

// Runs after VerifyKernel on the same stream: records the value at the first mismatch.
template <typename T>
__global__ void RecordFirstMismatchKernel(const T* output, VerifySlot slot) {
  unsigned long long first = *slot.first_index;
  if (first != ~0ull) *slot.first_value = static_cast<float>(Element<T>::Load(output + first));
}

__global__ void SpinKernel(unsigned long long cycles) {
  long long start = clock64();
  while (static_cast<unsigned long long>(clock64() - start) < cycles) {
  }
}

// Calls f with a null pointer of the element type of `type`.
template <typename F>
cudaError_t Dispatch(ReduceType type, F f) {
  switch (type) {
    case ReduceType::kFloat16:
      f(static_cast<__half*>(nullptr));
      break;
    case ReduceType::kBFloat16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case ReduceType::kFloat32:
      f(static_cast<float*>(nullptr));
      break;
    case ReduceType::kFloat64:
      f(static_cast<double*>(nullptr));
      break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchFillPattern(void* buffer, ReduceType type, std::uint64_t offset, int rows,
                              std::uint64_t numel, std::uint64_t row_stride, std::uint64_t request,
                              int rank, cudaStream_t stream) {
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    FillKernel<T><<<BlocksFor(rows * numel), kThreads, 0, stream>>>(
        static_cast<T*>(buffer) + offset, rows, numel, row_stride, request, rank);
  });
}

cudaError_t LaunchReduceRows(const void* input, void* output, ReduceType type, int rows,
                             std::uint64_t numel, cudaStream_t stream) {
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ReduceRowsKernel<T><<<BlocksFor(numel), kThreads, 0, stream>>>(
        static_cast<const T*>(input), static_cast<T*>(output), rows, numel);
  });
}

cudaError_t LaunchVerify(const void* output, ReduceType type, std::uint64_t offset,
                         std::uint64_t numel, std::uint64_t first_j, std::uint64_t request,
                         const PatternExpectation& expectation, VerifySlot slot,
                         cudaStream_t stream) {
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* slice = static_cast<const T*>(output) + offset;
    VerifyKernel<T><<<BlocksFor(numel), kThreads, 0, stream>>>(slice, numel, first_j, request,
                                                               expectation, slot);
    RecordFirstMismatchKernel<T><<<1, 1, 0, stream>>>(slice, slot);
  });
}

cudaError_t LaunchSpin(std::uint64_t cycles, cudaStream_t stream) {
  if (cycles == 0) return cudaSuccess;
  SpinKernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

}  // namespace bucketsim
