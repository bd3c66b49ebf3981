// Replay throughput of one policy on one core, per memory model, on a shallow and a deep model
// of about the same number of events: a generated transformer of 250 blocks (200 iterations)
// and one of 2000 blocks (25 iterations), each about 1.05M events, held in memory (no parsing is
// measured). items_per_second is events per second; the two depths should give about the same
// figure, since nothing the replay does per event may grow with the number of layers (the peak's
// composition is ranked once, the free-block index is O(log n)). Run, for example:
//
//   build/bench/bucketsim_bench --benchmark_filter=BM_ReplayDepth --benchmark_repetitions=3
//
// BUCKETSIM_BENCH_DEPTH_SCALE=N divides both traces' iterations by N, for instruction counts
// under callgrind (tools/bench-instructions.sh), which are independent of the machine's load.
#include <algorithm>

#include <benchmark/benchmark.h>

#include "bench_trace.h"

namespace bucketsim {
namespace {

void BM_ReplayDepth(benchmark::State& state, Depth depth, const char* allocator,
                    const char* policy) {
  Result<ReplayRequest> request = RequestFor({policy});
  if (SkipIfError(state, request.status())) return;
  Result<MemoryModelFactory> factory = MakeMemoryModelFactory({allocator, "", std::nullopt});
  if (SkipIfError(state, factory.status())) return;
  request->make_memory_model = *factory;
  const int scale = std::max(1, FromEnvironment("BUCKETSIM_BENCH_DEPTH_SCALE", 1));
  ReplayLoop(state, *request, DepthTrace(depth.layers, std::max(1, depth.iterations / scale)));
}

// One benchmark per (depth, model, policy): BM_ReplayDepth/deep2000/caching/backward-only.
[[maybe_unused]] const bool kRegistered = [] {
  for (const Depth& depth : {kShallow, kDeep}) {
    for (const char* allocator : {"exact", "caching"}) {
      for (const char* policy : kThreePolicies) {
        std::string name =
            std::string("BM_ReplayDepth/") + depth.name + "/" + allocator + "/" + policy;
        benchmark::RegisterBenchmark(name.c_str(), BM_ReplayDepth, depth, allocator, policy)
            ->Unit(benchmark::kMillisecond)
            ->Iterations(1);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace bucketsim
