// The cuda backend's kernels, behind plain launch functions so that host code compiled as C++20
// (cuda_backend.cc) calls them without nvcc: the pattern fill of a stacked gradient, the check
// of a reduced slice against the analytic sum (backend/verify_pattern.h), the local reduction
// of an emulated reduce-scatter, and the calibrated spin that stands in for a compute span.
// Each returns the launch's cudaError_t (cudaGetLastError after the launch).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/reduce_type.h"
#include "backend/verify_pattern.h"

namespace bucketsim {

// buffer[offset + row * row_stride + j] = PatternValue(rank, request, row, j) for row < rows,
// j < numel (core/buffer_ops.h GradientFill).
cudaError_t LaunchFillPattern(void* buffer, ReduceType type, std::uint64_t offset, int rows,
                              std::uint64_t numel, std::uint64_t row_stride, std::uint64_t request,
                              int rank, cudaStream_t stream);

// output[j] = sum over r < rows of input[r][j]: what an n-rank reduce-scatter computes, done
// by one process on its own n rows (emulation). Sums in fp32 (fp64 for fp64).
cudaError_t LaunchReduceRows(const void* input, void* output, ReduceType type, int rows,
                             std::uint64_t numel, cudaStream_t stream);

// Where one slice's check leaves its result, in device memory: the mismatching elements, the
// lowest mismatching index (~0 when none) and the value found there.
struct VerifySlot {
  unsigned long long* mismatches = nullptr;
  unsigned long long* first_index = nullptr;
  float* first_value = nullptr;
};

// Compares output[offset + j], j < numel, with expectation.At(request, first_j + j) rounded to
// the type, and fills `slot` (which must start at 0 / ~0).
cudaError_t LaunchVerify(const void* output, ReduceType type, std::uint64_t offset,
                         std::uint64_t numel, std::uint64_t first_j, std::uint64_t request,
                         const PatternExpectation& expectation, VerifySlot slot,
                         cudaStream_t stream);

// One thread spins `cycles` clock64() cycles (0: returns at once).
cudaError_t LaunchSpin(std::uint64_t cycles, cudaStream_t stream);

}  // namespace bucketsim
