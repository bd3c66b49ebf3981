// Replay throughput on one core, per memory model, on a shallow and a deep model of about the
// same number of events: a generated transformer of 250 blocks (200 iterations) and one of 2000
// blocks (25 iterations), each about 7.4M events, held in memory (no parsing is measured).
// items_per_second is events per second; the two depths should give about the same figure, since
// nothing done per event may grow with the number of layers (the peak's composition is ranked
// once, the free-block index is O(log n)). Three benchmarks split a run the way a `compare` or
// `sweep` of P policies spends its time: one check of the trace, then P replays.
//
// - BM_ReplayDepth: the checker and one policy's replay, as `compare` with one policy runs them.
// - BM_CheckDepth: the checker alone (TraceChecker with no replay behind it), once per trace.
// - BM_PolicyReplayDepth: one policy's replay of events the checker has already annotated (slots,
//   the bytes of frees), which is what each further policy adds, and what each worker thread of a
//   parallel `compare` runs. The events are checked once, before the timed loop.
//
// Run, for example:
//
//   build/bench/bucketsim_bench --benchmark_filter='Depth/' --benchmark_repetitions=3
//
// BUCKETSIM_BENCH_DEPTH_SCALE=N divides both traces' iterations by N, for instruction counts
// under callgrind (bench/instructions.sh), which are independent of the machine's load.
#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include <benchmark/benchmark.h>

#include "bench_trace.h"
#include "engine/replay.h"

namespace bucketsim {
namespace {

const StoredTrace& ScaledDepthTrace(const Depth& depth) {
  const int scale = std::max(1, FromEnvironment("BUCKETSIM_BENCH_DEPTH_SCALE", 1));
  return DepthTrace(depth.layers, std::max(1, depth.iterations / scale));
}

Result<ReplayRequest> DepthRequest(const char* allocator, const char* policy) {
  Result<ReplayRequest> request = RequestFor({policy});
  if (!request.ok()) return request.status();
  Result<MemoryModelFactory> factory =
      MakeMemoryModelFactory({allocator, "", std::nullopt, std::nullopt});
  if (!factory.ok()) return factory.status();
  request->make_memory_model = *factory;
  return request;
}

void BM_ReplayDepth(benchmark::State& state, Depth depth, const char* allocator,
                    const char* policy) {
  Result<ReplayRequest> request = DepthRequest(allocator, policy);
  if (SkipIfError(state, request.status())) return;
  ReplayLoop(state, *request, ScaledDepthTrace(depth));
}

void BM_CheckDepth(benchmark::State& state, Depth depth) {
  CheckLoop(state, ScaledDepthTrace(depth));
}

// The depth trace's events as the checker hands them to a replay, made on first use.
const StoredTrace& CheckedDepthTrace(const Depth& depth) {
  static std::map<std::string, StoredTrace> checked;
  auto [it, inserted] = checked.try_emplace(depth.name);
  if (inserted) it->second = CheckedCopy(ScaledDepthTrace(depth));
  return it->second;
}

void BM_PolicyReplayDepth(benchmark::State& state, Depth depth, const char* allocator,
                          const char* policy) {
  Result<ReplayRequest> request = DepthRequest(allocator, policy);
  if (SkipIfError(state, request.status())) return;
  const StoredTrace& checked = CheckedDepthTrace(depth);
  for (auto _ : state) {
    Result<std::vector<std::unique_ptr<Replay>>> made = MakeReplays(*request, checked.header);
    if (SkipIfError(state, made.status())) return;
    Replay& replay = *made->front();
    if (SkipIfError(state, replay.OnHeader(checked.header))) return;
    for (const Event& event : checked.events) {
      if (SkipIfError(state, replay.OnEvent(event))) return;
    }
    if (SkipIfError(state, replay.OnEnd())) return;
    benchmark::DoNotOptimize(replay.TakeResult().events);
  }
  CountEvents(state, checked.events.size());
}

// One benchmark per (depth, model, policy): BM_ReplayDepth/deep2000/caching/backward-only,
// BM_PolicyReplayDepth/deep2000/caching/backward-only; and one per depth: BM_CheckDepth/deep2000.
[[maybe_unused]] const bool kRegistered = [] {
  for (const Depth& depth : {kShallow, kDeep}) {
    for (const char* allocator : {"exact", "caching"}) {
      for (const char* policy : kThreePolicies) {
        const std::string suffix = std::string(depth.name) + "/" + allocator + "/" + policy;
        benchmark::RegisterBenchmark(("BM_ReplayDepth/" + suffix).c_str(), BM_ReplayDepth, depth,
                                     allocator, policy)
            ->Unit(benchmark::kMillisecond)
            ->Iterations(1);
        benchmark::RegisterBenchmark(("BM_PolicyReplayDepth/" + suffix).c_str(),
                                     BM_PolicyReplayDepth, depth, allocator, policy)
            ->Unit(benchmark::kMillisecond)
            ->Iterations(1);
      }
    }
    benchmark::RegisterBenchmark((std::string("BM_CheckDepth/") + depth.name).c_str(),
                                 BM_CheckDepth, depth)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  return true;
}();

}  // namespace
}  // namespace bucketsim
