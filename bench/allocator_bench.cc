// The caching-allocator model alone (malloc+free pairs per second on a realistic size mix, the
// items_per_second counter), and a three-policy replay of the benchmark trace accounted with it
// (compare's default) next to the exact model's.
#include <random>

#include <benchmark/benchmark.h>

#include "bench_trace.h"
#include "memory/caching_allocator_model.h"

namespace bucketsim {
namespace {

// A training step's mix: many small tensors, some activations of a few MiB, a few large
// all-gather buffers. Sizes drawn once so the timed loop only allocates and frees.
std::vector<Bytes> SizeMix(std::size_t n) {
  std::mt19937_64 rng(42);
  std::vector<Bytes> sizes(n);
  for (Bytes& size : sizes) {
    double u = std::uniform_real_distribution<>(0, 1)(rng);
    Bytes cap = u < 0.4 ? 64 * kKiB : u < 0.7 ? kMiB : u < 0.9 ? 10 * kMiB : 100 * kMiB;
    size = std::uniform_int_distribution<Bytes>(1, cap)(rng);
  }
  return sizes;
}

// `live` allocations stay alive; each pair frees the oldest and allocates the next size.
void BM_CachingAllocatorPairs(benchmark::State& state) {
  const auto live = static_cast<std::size_t>(state.range(0));
  const std::vector<Bytes> sizes = SizeMix(1 << 16);
  CachingAllocatorModel model;
  std::vector<Block> ring(live);
  std::size_t next = 0;
  for (Block& block : ring) block = *model.Allocate(sizes[next++ % sizes.size()], 0);
  std::size_t oldest = 0;
  for (auto _ : state) {
    model.Free(ring[oldest]);
    StreamId stream = (next & 1) ? 0 : 1;  // two streams, as trace and policy buffers
    ring[oldest] = *model.Allocate(sizes[next % sizes.size()], stream);
    ++next;
    oldest = (oldest + 1) % live;
  }
  state.SetItemsProcessed(state.iterations());
  benchmark::DoNotOptimize(model.reserved_bytes());
}

void BM_ReplayThreePolicies(benchmark::State& state, const char* allocator) {
  Result<ReplayRequest> request = RequestFor(kThreePolicies);
  if (SkipIfError(state, request.status())) return;
  Result<MemoryModelFactory> factory =
      MakeMemoryModelFactory({allocator, "", std::nullopt, std::nullopt});
  if (SkipIfError(state, factory.status())) return;
  request->make_memory_model = *factory;
  ReplayLoop(state, *request);
}

BENCHMARK(BM_CachingAllocatorPairs)->Arg(256)->Arg(2048);
BENCHMARK_CAPTURE(BM_ReplayThreePolicies, exact, "exact")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
BENCHMARK_CAPTURE(BM_ReplayThreePolicies, caching, "caching")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

}  // namespace
}  // namespace bucketsim
