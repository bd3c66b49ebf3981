#include "bench_trace.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "engine/trace_checker.h"
#include "gen/transformer_preset.h"
#include "io/trace_writer.h"
#include "policy/policy_spec.h"

namespace bucketsim {
namespace {

// 2000 blocks for 36 iterations: about 1.5M events (about 21 per block and iteration).
// BUCKETSIM_BENCH_LAYERS and BUCKETSIM_BENCH_ITERATIONS override them, to profile a smaller
// trace under callgrind or to see how the cost per event scales with the model's depth.
constexpr int kLayers = 2000;
constexpr int kIterations = 36;

// Keeps every event; copies the header at the end, when the names are complete.
class StoringSink final : public EventSink {
 public:
  explicit StoringSink(StoredTrace& trace) : trace_(trace) {}

  Status OnHeader(const TraceHeader& header) override {
    header_ = &header;
    return Status::Ok();
  }
  Status OnEvent(const Event& event) override {
    trace_.events.push_back(event);
    return Status::Ok();
  }
  Status OnEnd() override {
    trace_.header = *header_;
    return Status::Ok();
  }

 private:
  StoredTrace& trace_;
  const TraceHeader* header_ = nullptr;
};

void CheckOk(const Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "bucketsim_bench: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

StoredTrace Generate(int layers, int iterations) {
  TransformerConfig config;
  config.layers = layers;
  config.iterations = iterations;
  StoredTrace trace;
  StoringSink sink(trace);
  CheckOk(GenerateTransformer(config, sink), "generating the bench trace");
  return trace;
}

// The temporary trace file; removed by the destructor at exit.
class TempTraceFile {
 public:
  TempTraceFile()
      : path_((std::filesystem::temp_directory_path() /
               ("bucketsim_bench_" + std::to_string(::getpid()) + ".json"))
                  .string()) {
    Result<std::unique_ptr<TraceWriter>> writer = TraceWriter::Open(path_);
    CheckOk(writer.status(), "opening the bench trace file");
    TraceHeader header;
    CheckOk(StoredSource(BenchTrace())(header, **writer), "writing the bench trace file");
  }
  ~TempTraceFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempTraceFile(const TempTraceFile&) = delete;
  TempTraceFile& operator=(const TempTraceFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

int FromEnvironment(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr ? std::atoi(text) : fallback;
}

const StoredTrace& BenchTrace() {
  static const StoredTrace trace =
      Generate(FromEnvironment("BUCKETSIM_BENCH_LAYERS", kLayers),
               FromEnvironment("BUCKETSIM_BENCH_ITERATIONS", kIterations));
  return trace;
}

const StoredTrace& DepthTrace(int layers, int iterations) {
  static std::map<std::pair<int, int>, StoredTrace> traces;
  auto [it, inserted] = traces.try_emplace({layers, iterations});
  if (inserted) it->second = Generate(layers, iterations);
  return it->second;
}

TraceSource StoredSource(const StoredTrace& trace) {
  return [&trace](TraceHeader& header, EventSink& sink) -> Status {
    header = trace.header;
    BUCKETSIM_RETURN_IF_ERROR(sink.OnHeader(header));
    for (const Event& event : trace.events) BUCKETSIM_RETURN_IF_ERROR(sink.OnEvent(event));
    return sink.OnEnd();
  };
}

StoredTrace CheckedCopy(const StoredTrace& trace) {
  StoredTrace checked;
  checked.events.reserve(trace.events.size());
  StoringSink sink(checked);
  TraceChecker checker(&sink);
  TraceHeader header;
  CheckOk(StoredSource(trace)(header, checker), "checking the bench trace");
  return checked;
}

const std::string& BenchTraceFile() {
  static const TempTraceFile file;
  return file.path();
}

double BenchTraceFileMegabytes() {
  return static_cast<double>(std::filesystem::file_size(BenchTraceFile())) / 1e6;
}

Result<ReplayRequest> RequestFor(std::initializer_list<const char*> policies) {
  ReplayRequest request;
  for (const char* name : policies) {
    Result<PolicySpec> spec = ParsePolicySpec(name);
    if (!spec.ok()) return spec.status();
    request.policies.push_back(*spec);
  }
  request.options.keep_collective_log = true;
  return request;
}

void CountEvents(benchmark::State& state, std::uint64_t events_per_iteration) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events_per_iteration));
  state.counters["events"] = static_cast<double>(events_per_iteration);
}

bool SkipIfError(benchmark::State& state, const Status& status) {
  if (status.ok()) return false;
  state.SkipWithError(status.ToString().c_str());
  return true;
}

void CheckLoop(benchmark::State& state, const StoredTrace& trace) {
  const TraceSource source = StoredSource(trace);
  for (auto _ : state) {
    TraceChecker checker(nullptr);
    TraceHeader header;
    if (SkipIfError(state, source(header, checker))) return;
    benchmark::DoNotOptimize(checker.summary().events);
  }
  CountEvents(state, trace.events.size());
}

void ReplayLoop(benchmark::State& state, const ReplayRequest& request) {
  ReplayLoop(state, request, BenchTrace());
}

void ReplayLoop(benchmark::State& state, const ReplayRequest& request, const StoredTrace& trace) {
  const TraceSource source = StoredSource(trace);
  for (auto _ : state) {
    Result<ReplayOutcome> outcome = ReplayPolicies(source, request);
    if (SkipIfError(state, outcome.status())) return;
    benchmark::DoNotOptimize(outcome->runs.data());
  }
  CountEvents(state, trace.events.size());
}

}  // namespace bucketsim
