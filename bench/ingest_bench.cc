// Ingest: reading the bench trace back from the file TraceWriter made of it. Parsing alone (into
// a sink that drops every event) gives bytes/s and events/s, through ReadTrace's stream and
// through a string holding the whole file; the three-policy compare from the
// file (read -> check -> three replays) is to be set against BM_Replay/compare_three of
// replay_bench.cc, the same compare from memory, to see whether the parse dominates.
#include <filesystem>
#include <fstream>

#include <benchmark/benchmark.h>

#include "bench_trace.h"
#include "io/trace_reader.h"

namespace bucketsim {
namespace {

void SetTraceFileCounters(benchmark::State& state) {
  const double megabytes = BenchTraceFileMegabytes();
  state.SetBytesProcessed(
      static_cast<std::int64_t>(static_cast<double>(state.iterations()) * megabytes * 1e6));
  state.counters["trace_MB"] = megabytes;
}

void BM_ReadTrace(benchmark::State& state) {
  const std::string& path = BenchTraceFile();  // written on first use, before the timed loop
  std::uint64_t events = 0;
  for (auto _ : state) {
    CountingSink sink;
    TraceHeader header;
    if (SkipIfError(state, ReadTrace(path, header, sink))) return;
    events = sink.events();
  }
  CountEvents(state, events);
  SetTraceFileCounters(state);
}

// The whole file read into a string, then parsed from memory: separates the stream input of
// ReadTrace from the parse itself. The read is timed too, as a reader that did this would pay it.
void BM_ReadTraceViaString(benchmark::State& state) {
  const std::string& path = BenchTraceFile();
  std::uint64_t events = 0;
  for (auto _ : state) {
    std::ifstream in(path, std::ios::binary);
    std::string json(std::filesystem::file_size(path), '\0');
    in.read(json.data(), static_cast<std::streamsize>(json.size()));
    CountingSink sink;
    TraceHeader header;
    if (SkipIfError(state, ReadTraceFromString(json, path, header, sink))) return;
    events = sink.events();
  }
  CountEvents(state, events);
  SetTraceFileCounters(state);
}

void BM_CompareThreeFromFile(benchmark::State& state) {
  Result<ReplayRequest> request = RequestFor(kThreePolicies);
  if (SkipIfError(state, request.status())) return;
  const std::string& path = BenchTraceFile();
  const TraceSource source = [&path](TraceHeader& header, EventSink& sink) {
    return ReadTrace(path, header, sink);
  };
  std::uint64_t events = 0;
  for (auto _ : state) {
    Result<ReplayOutcome> outcome = ReplayPolicies(source, *request);
    if (SkipIfError(state, outcome.status())) return;
    events = outcome->summary.events;
  }
  CountEvents(state, events);
  SetTraceFileCounters(state);
}

constexpr int kIterations = 2;

BENCHMARK(BM_ReadTrace)->Unit(benchmark::kMillisecond)->Iterations(kIterations);
BENCHMARK(BM_ReadTraceViaString)->Unit(benchmark::kMillisecond)->Iterations(kIterations);
BENCHMARK(BM_CompareThreeFromFile)->Unit(benchmark::kMillisecond)->Iterations(kIterations);

}  // namespace
}  // namespace bucketsim
