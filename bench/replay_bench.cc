// Replay throughput with the exact memory model and the sim backend, from a trace held in
// memory (so no parsing is measured): each default policy alone, the three bucketing policies
// of the ingest comparison, all four in one pass (what `bucketsim compare` does), the checker
// alone (its cost is paid once per pass, whatever the number of policies), and the bare
// streaming of the stored events. items_per_second is events per second.
#include <benchmark/benchmark.h>

#include "bench_trace.h"

namespace bucketsim {
namespace {

void BM_Replay(benchmark::State& state, std::initializer_list<const char*> policies) {
  Result<ReplayRequest> request = RequestFor(policies);
  if (SkipIfError(state, request.status())) return;
  ReplayLoop(state, *request);
  state.counters["policies"] = static_cast<double>(policies.size());
}

void BM_CheckerAlone(benchmark::State& state) { CheckLoop(state, BenchTrace()); }

void BM_StreamStoredEvents(benchmark::State& state) {
  const StoredTrace& trace = BenchTrace();
  const TraceSource source = StoredSource(trace);
  for (auto _ : state) {
    CountingSink sink;
    TraceHeader header;
    if (SkipIfError(state, source(header, sink))) return;
  }
  CountEvents(state, trace.events.size());
}

constexpr int kIterations = 2;

BENCHMARK(BM_StreamStoredEvents)->Unit(benchmark::kMillisecond)->Iterations(kIterations);
BENCHMARK(BM_CheckerAlone)->Unit(benchmark::kMillisecond)->Iterations(kIterations);
BENCHMARK_CAPTURE(BM_Replay, always_allocated, {"always-allocated"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(kIterations);
BENCHMARK_CAPTURE(BM_Replay, backward_only, {"backward-only"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(kIterations);
BENCHMARK_CAPTURE(BM_Replay, per_group_dedup, {"per-group-dedup"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(kIterations);
BENCHMARK_CAPTURE(BM_Replay, unbucketed, {"unbucketed"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(kIterations);
BENCHMARK_CAPTURE(BM_Replay, compare_three, kThreePolicies)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(kIterations);
BENCHMARK_CAPTURE(BM_Replay, compare_all_four,
                  {"always-allocated", "backward-only", "per-group-dedup", "unbucketed"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(kIterations);

}  // namespace
}  // namespace bucketsim
