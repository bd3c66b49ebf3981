// The trace every benchmark replays or reads: a GPT-style transformer from the generator, sized
// to about 1.5M events, generated once per process and kept in memory as plain events. The same
// trace is written once to a temporary file for the ingest benchmarks; the file is removed when
// the process exits. Generation and writing happen outside every timed region.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/event_sink.h"
#include "engine/replay_policies.h"

namespace bucketsim {

struct StoredTrace {
  TraceHeader header;  // with every name the events intern
  std::vector<Event> events;
};

// The integer in environment variable `name`, else `fallback`.
int FromEnvironment(const char* name, int fallback);

// Generated on first use; aborts when the generator fails (a bench set-up bug, not a result).
const StoredTrace& BenchTrace();

// A generated transformer trace of `layers` blocks and `iterations` iterations, generated on
// first use and kept for the process (the depth benches: the cost per event must not grow with
// the depth of the model).
const StoredTrace& DepthTrace(int layers, int iterations);

// The two traces of the depth benches (BM_ReplayDepth, BM_CachingModelCalls): a shallow and a
// deep generated transformer of about the same number of events, for DepthTrace.
struct Depth {
  const char* name;
  int layers;
  int iterations;
};
inline constexpr Depth kShallow{"shallow250", 250, 200};
inline constexpr Depth kDeep{"deep2000", 2000, 25};

// `trace`'s events as TraceChecker hands them on (slots assigned, frees given their bytes and
// category), and its header: what each replay of a compare receives. Aborts when the trace is
// inconsistent (a bench set-up bug).
StoredTrace CheckedCopy(const StoredTrace& trace);

// A TraceSource that streams `trace` (copying the header into the caller's), as a reader would.
TraceSource StoredSource(const StoredTrace& trace);

// The bench trace written with TraceWriter to a temporary file, on first use.
const std::string& BenchTraceFile();
double BenchTraceFileMegabytes();

// A request for the named policies (ParsePolicySpec names), collective log on as compare has it.
Result<ReplayRequest> RequestFor(std::initializer_list<const char*> policies);
// The three bucketing policies of the ingest comparison.
inline constexpr std::initializer_list<const char*> kThreePolicies = {
    "always-allocated", "backward-only", "per-group-dedup"};

// Drops every event, counting them: the floor under any real sink.
class CountingSink final : public EventSink {
 public:
  Status OnHeader(const TraceHeader&) override { return Status::Ok(); }
  Status OnEvent(const Event& event) override {
    benchmark::DoNotOptimize(event.index);
    ++events_;
    return Status::Ok();
  }
  Status OnEnd() override { return Status::Ok(); }
  std::uint64_t events() const { return events_; }

 private:
  std::uint64_t events_ = 0;
};

// Sets items (events) processed and the "events" counter for `events_per_iteration`.
void CountEvents(benchmark::State& state, std::uint64_t events_per_iteration);

// Skips the benchmark with the status's message when it is not OK.
bool SkipIfError(benchmark::State& state, const Status& status);

// The timed loop of the checker benchmarks: TraceChecker alone (no replay behind it) over the
// stored trace, events counted.
void CheckLoop(benchmark::State& state, const StoredTrace& trace);

// The timed loop of every replay benchmark: `request` over the stored trace, events counted.
void ReplayLoop(benchmark::State& state, const ReplayRequest& request);
void ReplayLoop(benchmark::State& state, const ReplayRequest& request, const StoredTrace& trace);

}  // namespace bucketsim
